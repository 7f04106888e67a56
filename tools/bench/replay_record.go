package bench

// Recording CreateOrder's statements for the replay leg: one real
// orders.Store.Create through a pool whose pgx tracer keeps every statement
// it executes, so the replayed script is the code's, never a copy of it.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/platform/pg"
)

// recordUser is the user of the recorded order: far from any activity, SKU
// or price of the bench, so only the user id is rendered as :uid. pgbench's
// random users (1..MaxPGBenchUser) meet it with a probability below 10^-13.
const recordUser int64 = 8_765_432_109_876_543_210

// statementTracer is a pgx.QueryTracer that keeps the statements it sees
// while on. BEGIN and COMMIT go through it too: pgx runs them with Exec.
type statementTracer struct {
	mu    sync.Mutex
	on    bool
	stmts []Statement
}

func (t *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on {
		t.stmts = append(t.stmts, Statement{SQL: d.SQL, Args: append([]any(nil), d.Args...)})
	}
	return ctx
}

func (t *statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// record switches recording on (true) or off, returning what it kept.
func (t *statementTracer) record(on bool) []Statement {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = on
	s := t.stmts
	t.stmts = nil
	return s
}

// RecordCreateOrder runs one real orders.Store.Create for (activityID,
// skuID) on dsn, a database whose sale has stock left for it, and returns
// the statements it executed: the "order created" path, which takes one unit
// of the SKU's stock and writes one order. The message is built as leg (b)
// builds its own (sampleMessage); every statement is then described on the
// same connection for its parameters' types.
func RecordCreateOrder(ctx context.Context, dsn string, activityID, skuID int64, log *slog.Logger) (Recording, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return Recording{}, fmt.Errorf("record CreateOrder: %w", err)
	}
	tracer := &statementTracer{}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return Recording{}, fmt.Errorf("record CreateOrder: %w", err)
	}
	defer pool.Close()
	verify, err := pg.Open(ctx, dsn, 1)
	if err != nil {
		return Recording{}, err
	}
	defer verify.Close()
	store, err := orders.NewStore(orders.Deps{Pool: pool, Verify: verify, Topic: Topic, Log: log})
	if err != nil {
		return Recording{}, err
	}
	if err := pool.Ping(ctx); err != nil { // connect outside the recording
		return Recording{}, err
	}
	at := time.Now().Truncate(time.Millisecond) // the message's own precision
	m := sampleMessage(activityID, skuID, recordUser, at)
	tracer.record(true)
	res, err := store.Create(ctx, m)
	stmts := tracer.record(false)
	switch {
	case err != nil:
		return Recording{}, fmt.Errorf("record CreateOrder: %w", err)
	case res.Outcome != orders.OutcomeCreated || res.Duplicate:
		return Recording{}, fmt.Errorf("record CreateOrder: %s %s (duplicate %v), want a new order", res.Outcome, res.Reason, res.Duplicate)
	}
	if err := describe(ctx, pool, stmts); err != nil {
		return Recording{}, err
	}
	return Recording{ActivityID: activityID, SKUID: skuID, UserID: recordUser, At: at, Statements: stmts}, nil
}

// describe sets the ParamTypes of every statement that has arguments, from
// PostgreSQL's description of it (an unnamed prepare: nothing is executed).
func describe(ctx context.Context, pool *pgxpool.Pool, stmts []Statement) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	for i := range stmts {
		if len(stmts[i].Args) == 0 {
			continue
		}
		sd, err := c.Conn().PgConn().Prepare(ctx, "", stmts[i].SQL, nil)
		if err != nil {
			return fmt.Errorf("describe %q: %w", stmts[i].SQL, err)
		}
		types := make([]string, len(sd.ParamOIDs))
		for j, oid := range sd.ParamOIDs {
			if t, ok := c.Conn().TypeMap().TypeForOID(oid); ok {
				types[j] = t.Name
			}
		}
		stmts[i].ParamTypes = types
	}
	return nil
}
