package bench

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// withDBName returns dsn with its database replaced.
func withDBName(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("SECKILL_PG_DSN must be a postgres:// URL for the scratch database: %v", err)
	}
	u.Path = "/" + db
	return u.String(), nil
}

// execAdmin runs one statement on a fresh connection to dsn.
func execAdmin(ctx context.Context, dsn, sql string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, sql)
	return err
}

// vacuum runs VACUUM on sku_inventory between the PostgreSQL legs, so that
// every leg starts from the same state: the legs' hot SKU rows share one
// heap page, and the tens of thousands of updates of one leg would leave
// dead row versions there for the next leg to step over. The other tables
// are left alone: vacuuming (or analyzing) a table while it is still empty
// records 0 rows in its statistics, and the prepared statements' generic
// plans then scan it sequentially as it grows during the leg.
func (e *orderEnv) vacuum(ctx context.Context) error {
	_, err := e.conns.Pool.Exec(ctx, `VACUUM sku_inventory`)
	if err != nil {
		return fmt.Errorf("vacuum between legs: %w", err)
	}
	return nil
}

// taken is the stock taken from a SKU so far (initial - available).
func (e *orderEnv) taken(ctx context.Context, sku int64) (int64, error) {
	var n int64
	err := e.conns.Pool.QueryRow(ctx, `SELECT initial_stock - available_stock FROM sku_inventory WHERE activity_id = $1 AND sku_id = $2`,
		e.activity, sku).Scan(&n)
	return n, err
}

// reservationCounts counts leg (c)'s reservations in PostgreSQL: created
// orders, and any that ended otherwise (rejected, compensated, manual).
func (e *orderEnv) reservationCounts(ctx context.Context) (created, other int64, err error) {
	err = e.conns.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status = 'ORDER_CREATED'),
		       count(*) FILTER (WHERE status NOT IN ('ORDER_CREATED', 'RESERVED'))
		FROM inventory_reservation WHERE activity_id = $1 AND sku_id = $2`, e.activity, orderSKUSagas).Scan(&created, &other)
	return created, other, err
}

// application_name of the measured connections, so the wait sampler sees
// only them.
const (
	orderAppPGBench = "seckill-bench-order-pgbench"
	orderAppCreate  = "seckill-bench-order-createorder"
)

// withAppName sets application_name in a postgres:// DSN.
func withAppName(dsn, app string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sampleWaits samples, every 50 ms on a connection of its own, what the
// scratch database's backends of application app are doing (state and wait
// event in pg_stat_activity), until the returned function is called; that
// returns the shares. Sampling errors end it quietly (no shares).
func (e *orderEnv) sampleWaits(ctx context.Context, app string) func() []WaitShare {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.progress("wait sampler: %v (no wait shares)", err)
		return func() []WaitShare { return nil }
	}
	stop, done := make(chan struct{}), make(chan map[string]int, 1)
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		counts := map[string]int{}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- counts
				return
			case <-ctx.Done():
				done <- counts
				return
			case <-tick.C:
			}
			rows, err := conn.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
				FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`, app)
			if err != nil {
				continue
			}
			for rows.Next() {
				var st, wt, we string
				if rows.Scan(&st, &wt, &we) == nil {
					counts[WaitState(st, wt, we)]++
				}
			}
			rows.Close()
		}
	}()
	return func() []WaitShare {
		close(stop)
		return WaitShares(<-done)
	}
}

// scratchDatabase creates the scratch database dbName next to the one dsn
// names, as the seckill role (it has CREATEDB), and returns its DSN and a
// function that drops it (nothing with keep).
func scratchDatabase(ctx context.Context, dsn, dbName string, keep bool, progress func(string, ...any)) (string, func(), error) {
	scratch, err := withDBName(dsn, dbName)
	if err != nil {
		return "", nil, err
	}
	adminDSN := dsn
	if err := execAdmin(ctx, adminDSN, "CREATE DATABASE "+dbName); err != nil {
		return "", nil, fmt.Errorf("create scratch database (the role needs CREATEDB): %w", err)
	}
	progress("scratch database %s created", dbName)
	if keep {
		return scratch, func() {}, nil
	}
	return scratch, func() {
		dctx, c := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer c()
		if err := execAdmin(dctx, adminDSN, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
			progress("drop scratch database %s failed: %v (drop it by hand)", dbName, err)
			return
		}
		progress("scratch database %s dropped", dbName)
	}, nil
}
