package migrations

import "context"

// DownTo rolls the database at dsn back to version v (tests).
func DownTo(ctx context.Context, dsn string, v int64) error {
	p, db, err := provider(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = p.DownTo(ctx, v)
	return err
}
