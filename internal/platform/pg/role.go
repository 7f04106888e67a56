package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// OwnerError is a process connected as a role that may change the schema:
// a superuser, or a member of the role that owns its tables.
type OwnerError struct {
	User        string
	Superuser   bool
	OwnedTables int
	Schema      string
}

func (e *OwnerError) Error() string {
	what := fmt.Sprintf("owns %d tables of schema %s", e.OwnedTables, e.Schema)
	if e.Superuser {
		what = "is a superuser"
	}
	return fmt.Sprintf("connects as %q, which %s: run the api, the workers and the operator commands as a login role "+
		"in seckill_app, which `seckill migrate` grants the rows and not the schema; only migrate connects as the owner "+
		"(docs/deploy.md#database-roles)", e.User, what)
}

// RefuseOwner fails with an OwnerError when the pool's role could alter,
// drop or truncate the schema's tables: a leaked application credential
// must not be able to change the schema or erase the history.
func RefuseOwner(ctx context.Context, pool *pgxpool.Pool) error {
	e := &OwnerError{}
	if err := pool.QueryRow(ctx, `
		SELECT current_user, r.rolsuper, current_schema(),
		       (SELECT count(*) FROM pg_class c
		         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
		           AND pg_has_role(current_user, c.relowner, 'MEMBER'))
		  FROM pg_roles r WHERE r.rolname = current_user`).Scan(&e.User, &e.Superuser, &e.Schema, &e.OwnedTables); err != nil {
		return fmt.Errorf("look up the database role: %w", err)
	}
	if e.Superuser || e.OwnedTables > 0 {
		return e
	}
	return nil
}
