// Package repairs owns repair_task: the audit record of every repair, by an
// operator (the saga's repair signal, activities.ApplyRepair) or by the
// reconciler (internal/reconcile). One shape for both: evidence is a JSON
// object, before_state and after_state are {"state": ..., "result": ...}.
package repairs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state"
)

// Entry is one repair to record.
type Entry struct {
	RepairID   string
	ObjectType string // RESERVATION, ORDER, SKU, ...
	ObjectID   string
	// Rule is MANUAL:<action> for operators, RECONCILE:<anomaly> for the reconciler.
	Rule string
	// ExpectedVersion is the object's version the repair was decided on
	// (recorded by Claim; an operator's repair locks the row instead).
	ExpectedVersion int64
	Target          string
	Status          state.Repair
	Operator        string
	Reason          string
	Evidence        map[string]any
	Before, After   string
	Result          string
}

// Recorded is a repair as repair_task holds it.
type Recorded struct {
	RepairID string
	ObjectID string
	Rule     string
	Status   state.Repair
	Result   string
	Before   string
	After    string
}

// snapshot is the JSON shape of before_state and after_state.
type snapshot struct {
	State  string `json:"state,omitempty"`
	Result string `json:"result,omitempty"`
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // maps of strings and numbers: cannot fail
		return []byte(`{}`)
	}
	return b
}

func evidence(e Entry) []byte {
	if e.Evidence == nil {
		return []byte(`{}`)
	}
	return encode(e.Evidence)
}

// Insert records a decided repair (applied or refused) in one statement.
// A repair_id that exists already is an error: the caller looks it up first.
func Insert(ctx context.Context, db pg.Execer, e Entry) error {
	return pg.MoveOne(ctx, db, "record repair "+e.RepairID, `
		INSERT INTO repair_task (repair_id, object_type, object_id, rule_name, target_state, status, operator, reason,
		                         evidence, before_state, after_state, result)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		e.RepairID, e.ObjectType, e.ObjectID, e.Rule, e.Target, e.Status, e.Operator, e.Reason,
		evidence(e), encode(snapshot{State: e.Before}), encode(snapshot{State: e.After, Result: e.Result}), e.Result)
}

// Claim records a repair about to be carried out (status PENDING) or needing
// people (MANUAL). first is true when this caller owns it: it recorded it
// first, or took over one that FAILED before or was left PENDING longer
// than stale by a run that died.
func Claim(ctx context.Context, db pg.Execer, e Entry, stale time.Duration) (first bool, err error) {
	n, err := pg.Moved(ctx, db, "record repair "+e.RepairID, `
		INSERT INTO repair_task (repair_id, object_type, object_id, rule_name, expected_version, target_state, status,
		                         operator, reason, evidence, before_state)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (repair_id) DO UPDATE SET status = EXCLUDED.status, evidence = EXCLUDED.evidence, updated_at = clock_timestamp()
		WHERE EXCLUDED.status = 'PENDING' AND (repair_task.status = 'FAILED'
		   OR (repair_task.status = 'PENDING' AND repair_task.updated_at < clock_timestamp() - $12::interval))`,
		e.RepairID, e.ObjectType, e.ObjectID, e.Rule, e.ExpectedVersion, e.Target, e.Status, e.Operator, e.Reason,
		evidence(e), encode(snapshot{State: e.Before}), stale.String())
	return n == 1, err
}

// Finish records how a claimed repair ended (APPLIED or FAILED) and what it did.
func Finish(ctx context.Context, db pg.Execer, repairID string, status state.Repair, result string) error {
	return pg.MoveOne(ctx, db, fmt.Sprintf("repair %s → %s", repairID, status), `
		UPDATE repair_task SET status = $2, result = $3, after_state = $4, updated_at = clock_timestamp()
		WHERE repair_id = $1`, repairID, status, result, encode(snapshot{Result: result}))
}

// Lookup returns the repair recorded under repairID; ok is false when there is none.
func Lookup(ctx context.Context, db pg.Querier, repairID string) (r Recorded, ok bool, err error) {
	var before, after []byte
	err = db.QueryRow(ctx, `SELECT rule_name, status, result, before_state, after_state, object_id FROM repair_task WHERE repair_id = $1`,
		repairID).Scan(&r.Rule, &r.Status, &r.Result, &before, &after, &r.ObjectID)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read repair %s: %w", repairID, err)
	}
	r.RepairID = repairID
	var b, a snapshot
	_ = json.Unmarshal(before, &b) // a shape this package did not write reads as empty
	_ = json.Unmarshal(after, &a)
	r.Before, r.After = b.State, a.State
	return r, true, nil
}
