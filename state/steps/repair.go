package steps

import "github.com/google/uuid"

// Repair actions an operator may signal (docs/operations.md). Each runs only
// standard transitions and only from the states listed with it.
const (
	// RepairRetryCompensation: reservation MANUAL_REVIEW with its
	// compensation task MANUAL → task RETRY, reservation ORDER_REJECTED; the
	// saga runs the standard compensation again (the Redis marker keeps it
	// at most once).
	RepairRetryCompensation = "retry-compensation"
	// RepairMarkResolved: reservation MANUAL_REVIEW; the operator attests the
	// case was settled outside the system. Business rows are not changed.
	RepairMarkResolved = "mark-resolved"
	// RepairForceCancelUnpaid: reservation ORDER_CREATED, order CREATED or
	// PAYING (the buyer will not pay) → the saga runs the standard cancel
	// (CANCEL_PENDING, provider close, CANCELLED only without a payment).
	RepairForceCancelUnpaid = "force-cancel-unpaid"
	// RepairRebuildProjection: reservation ORDER_CREATED → the saga re-runs
	// the idempotent Redis projection (order_created.lua).
	RepairRebuildProjection = "rebuild-projection"
)

// RepairActions lists the actions the repair signal accepts.
var RepairActions = []string{RepairRetryCompensation, RepairMarkResolved, RepairForceCancelUnpaid, RepairRebuildProjection}

// RepairRequest is the payload of the saga's repair signal.
type RepairRequest struct {
	Action   string `json:"action"`
	RepairID string `json:"repair_id"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	// ReservationID is filled in by the saga, never by the operator.
	ReservationID uuid.UUID `json:"reservation_id"`
}

// RepairResult is the recorded outcome of a repair.
type RepairResult struct {
	RepairID string
	Action   string
	Accepted bool
	Reason   string
	Before   string
	After    string
	// Duplicate: this repair_id was recorded before; nothing was done now.
	Duplicate bool
}

// BulkItem is what a bulk repair did to one saga (bulk_repair_item).
type BulkItem struct {
	WorkflowID string
	// Outcome: APPLIED (signalled), WOULD_APPLY (dry run), REFUSED (the
	// repair does not fit its state: Reason), SKIPPED (not running any more).
	Outcome string
	Reason  string `json:",omitempty"`
}

// Outcomes of one saga in a bulk repair.
const (
	BulkApplied    = "APPLIED"
	BulkWouldApply = "WOULD_APPLY"
	BulkRefused    = "REFUSED"
	BulkSkipped    = "SKIPPED"
)

// ReconcileInput is the input of one reconciliation run (the Reconcile activity's).
type ReconcileInput struct {
	// ActivityID limits the run to one sale; 0 reconciles every recent sale.
	ActivityID int64
}

// ReconcileSummary is what the Reconcile activity returns to its workflow
// (the full report is in reconcile_report).
type ReconcileSummary struct {
	ReportID  uuid.UUID
	SKUs      int
	Checked   int
	Anomalies int
	Counts    map[string]int
	// FailedSKUs are the SKUs the run could not check ("sku:activity:sku").
	FailedSKUs []string `json:",omitempty"`
}
