package workflows

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// recordedBranches says which recorded history covers which saga branch:
// each history must hold its steps, in this order, or the test fails (a
// branch whose history went missing, or a history that no longer takes its
// branch). A step is the kind and name of one history event
// ("activity:CreateOrder" scheduled, "local:CreateOrder" and
// "local-failed:CreateOrder" local-activity markers, "completed:"/"failed:"
// an activity's result or failure type, "signal:payment",
// "version:<change-id>", "timer", "workflow-completed"/"workflow-failed"),
// optionally with "=text" that the event's result must contain.
var recordedBranches = []struct {
	branch string
	file   string
	steps  []string
}{
	// The forward path as activities (runs started before SagaInput.LocalForward).
	{"expiry: cancel protocol, nothing paid, unit released", "saga_cancelled.json",
		[]string{"activity:CreateOrder", "timer", `completed:BeginCancel="CANCEL_PENDING"`, `completed:CloseAtProvider="NO_PAYMENT"`,
			`completed:FinalCancel="CANCELLED"`, "activity:ReleaseRedis", "workflow-completed"}},
	{"ClosePaid: the cancel's provider close finds the payment and records it", "saga_paid.json",
		[]string{"activity:CreateOrder", `completed:BeginCancel="CANCEL_PENDING"`, `completed:CloseAtProvider="Outcome":"PAID"`,
			"activity:RecordPayment", "workflow-completed"}},
	{"rejected, compensated", "saga_compensated.json",
		[]string{`completed:CreateOrder="ORDER_REJECTED"`, `completed:Compensate="COMPENSATED"`, "workflow-completed"}},
	{"late message", "saga_late.json", []string{`completed:CreateOrder="LATE_`, "workflow-completed"}},
	{"manual review, retry-compensation", "saga_manual_retry_compensation.json",
		[]string{"activity:CreateOrder", `completed:Compensate="MANUAL_REVIEW"`, "signal:repair", `completed:ApplyRepair="retry-compensation"`,
			`completed:Compensate="COMPENSATED"`}},
	{"manual review, a refused repair, mark-resolved", "saga_manual_mark_resolved.json",
		[]string{"activity:CreateOrder", `completed:Compensate="MANUAL_REVIEW"`, "signal:repair", `completed:ApplyRepair="Accepted":false`,
			`completed:ApplyRepair="mark-resolved"`, "workflow-completed"}},
	{"rebuild-projection, then force-cancel-unpaid", "saga_rebuild_projection_force_cancel.json",
		[]string{"activity:CreateOrder", `completed:ApplyRepair="rebuild-projection"`, "activity:ProjectOrderCreated",
			`completed:ApplyRepair="force-cancel-unpaid"`, "activity:BeginCancel", `completed:FinalCancel="CANCELLED"`}},
	{"the buyer's cancel", "saga_user_cancel.json",
		[]string{"activity:CreateOrder", "signal:cancel", "activity:BeginCancel", `completed:FinalCancel="CANCELLED"`}},
	{"resumed from PostgreSQL", "saga_resumed.json",
		[]string{`completed:LoadReservation="ORDER_CREATED"`, "activity:ProjectOrderCreated", `completed:FinalCancel="CANCELLED"`}},

	// The local forward path (SagaInput.LocalForward).
	{"local: late message", "saga_local_late.json", []string{`local:CreateOrder="LATE_`, "workflow-completed"}},
	{"local: manual review, retry-compensation", "saga_local_manual_retry_compensation.json",
		[]string{`local:CreateOrder="ORDER_REJECTED"`, `completed:Compensate="MANUAL_REVIEW"`, "signal:repair",
			`completed:ApplyRepair="retry-compensation"`, `completed:Compensate="COMPENSATED"`}},
	{"local: manual review, a refused repair, mark-resolved", "saga_local_manual_mark_resolved.json",
		[]string{`local:CreateOrder="ORDER_REJECTED"`, `completed:Compensate="MANUAL_REVIEW"`, `completed:ApplyRepair="Accepted":false`,
			`completed:ApplyRepair="mark-resolved"`, "workflow-completed"}},
	{"local: rebuild-projection, then force-cancel-unpaid", "saga_local_rebuild_projection_force_cancel.json",
		[]string{"local:CreateOrder", `completed:ApplyRepair="rebuild-projection"`, "local:ProjectOrderCreated",
			`completed:ApplyRepair="force-cancel-unpaid"`, `completed:FinalCancel="CANCELLED"`}},
	{"local: the buyer's cancel", "saga_local_user_cancel.json",
		[]string{"local:CreateOrder", "signal:cancel", "activity:BeginCancel", `completed:FinalCancel="CANCELLED"`}},
	{"local: resumed from PostgreSQL", "saga_local_resumed.json",
		[]string{`completed:LoadReservation="ORDER_CREATED"`, "local:ProjectOrderCreated", `completed:FinalCancel="CANCELLED"`}},
	{"payment signal: order still PAYING (wait on), then PAID", "saga_local_payment_signal.json",
		[]string{"local:CreateOrder", "signal:payment", `completed:OrderStatus="PAYING"`, "signal:payment", `completed:OrderStatus="PAID"`,
			"workflow-completed"}},
	{"PAYMENT_STARTING: the cancel waits for a payment being started, then ClosePaid", "saga_local_payment_starting_close_paid.json",
		[]string{"signal:cancel", `completed:BeginCancel="PAYMENT_STARTING"`, "timer", `completed:BeginCancel="CANCEL_PENDING"`,
			`completed:CloseAtProvider="Outcome":"PAID"`, `completed:RecordPayment="PAID"`, "workflow-completed"}},
	{"local step falls back to an activity", "saga_local_fallback.json",
		[]string{"local-failed:CreateOrder", "activity:CreateOrder", `completed:CreateOrder="ORDER_CREATED"`, "local:ProjectOrderCreated"}},
	{"CreateOrder failed for good: RejectUnprocessable, resume, compensate", "saga_local_unprocessable.json",
		[]string{"local-failed:CreateOrder", "activity:CreateOrder", "failed:CreateOrder=PermanentDatabaseError",
			"version:" + versionPermanentBranches, "activity:RejectUnprocessable", `completed:LoadReservation="ORDER_REJECTED"`,
			`completed:Compensate="COMPENSATED"`, "workflow-completed"}},
	{"compensation refused for good: resume from PostgreSQL", "saga_local_compensation_refused.json",
		[]string{`local:CreateOrder="ORDER_REJECTED"`, "failed:Compensate=BusinessRefusal", "version:" + versionPermanentBranches,
			"activity:LoadReservation", "workflow-completed"}},

	// RefundWorkflow.
	{"refund of a payment on a cancelled order", "refund_paid_after_cancel.json",
		[]string{"activity:BeginRefund", "activity:RefundAtProvider", "activity:FinishRefund", "workflow-completed"}},
	{"refund refused for good: HoldRefund (MANUAL), the run fails", "refund_held.json",
		[]string{"activity:BeginRefund", "failed:RefundAtProvider=BusinessRefusal", "version:" + versionPermanentBranches,
			"activity:HoldRefund", "workflow-failed"}},
}

// TestReplayRecordedHistories replays histories recorded from real sagas on
// the dev server against the workflow code of today: the three recorded with
// `temporal workflow show --output json` (paid, compensated, expired and
// cancelled) and those e2e.TestRecordSagaHistories records. Every branch in
// recordedBranches has its history, checked first: the forward path as
// activities and as local activities, expiry and the buyer's cancel, a late
// message, manual review ended by retry-compensation and by mark-resolved
// after a refused repair, rebuild-projection then force-cancel-unpaid, a lost
// saga resumed from PostgreSQL, the payment signal (order still PAYING, then
// PAID), the cancel waiting for a payment being started (PAYMENT_STARTING),
// the provider reporting the payment during the cancel (ClosePaid), a local
// step falling back to an activity, CreateOrder failed for good
// (RejectUnprocessable), a compensation refused for good (resume), and the
// refund of a payment on a cancelled order, given back or refused for good
// (HoldRefund). A change to the workflow code that would break running sagas
// fails here; put it behind workflow.GetVersion (docs/architecture.md,
// "Changing workflow code").
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) < len(recordedBranches) {
		t.Errorf("recorded histories: %v %v, want at least %d", files, err, len(recordedBranches))
	}
	t.Run("branches", func(t *testing.T) {
		for _, b := range recordedBranches {
			trace, err := historyTrace(filepath.Join("testdata", b.file))
			if err != nil {
				t.Errorf("%s: no history: %v", b.branch, err)
				continue
			}
			if missing := missingStep(trace, b.steps); missing != "" {
				t.Errorf("%s: %s does not take the branch: no %q (in order) in\n  %s", b.branch, b.file, missing, strings.Join(trace, "\n  "))
			}
		}
	})
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := newReplayer(t)
			r.RegisterWorkflow(ReservationSaga)
			r.RegisterWorkflow(RefundWorkflow)
			r.RegisterWorkflow(BulkRepairWorkflow)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// missingStep returns the first of steps that trace does not hold in order,
// or "" if it holds them all.
func missingStep(trace, steps []string) string {
	i := 0
	for _, step := range steps {
		head, text, _ := strings.Cut(step, "=")
		found := false
		for ; i < len(trace) && !found; i++ {
			h, v, _ := strings.Cut(trace[i], "=")
			found = h == head && strings.Contains(v, text)
		}
		if !found {
			return step
		}
	}
	return ""
}

// historyTrace reads a recorded history as the steps recordedBranches names.
func historyTrace(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return nil, err
	}
	scheduled := map[int64]string{}
	var trace []string
	for _, ev := range h.Events {
		if step := eventStep(ev, scheduled); step != "" {
			trace = append(trace, step)
		}
	}
	return trace, nil
}

func eventStep(ev *historypb.HistoryEvent, scheduled map[int64]string) string {
	switch ev.GetEventType() {
	case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		scheduled[ev.GetEventId()] = name
		return "activity:" + name
	case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := ev.GetActivityTaskCompletedEventAttributes()
		return "completed:" + scheduled[a.GetScheduledEventId()] + "=" + payloadText(a.GetResult())
	case enums.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := ev.GetActivityTaskFailedEventAttributes()
		return "failed:" + scheduled[a.GetScheduledEventId()] + "=" + a.GetFailure().GetApplicationFailureInfo().GetType()
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		return "signal:" + ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
	case enums.EVENT_TYPE_TIMER_STARTED:
		return "timer"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return "workflow-completed"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		return "workflow-failed"
	case enums.EVENT_TYPE_MARKER_RECORDED:
		return markerStep(ev.GetMarkerRecordedEventAttributes())
	}
	return ""
}

// markerStep names a local activity's marker by its activity type (and its
// result, or local-failed) and a version marker by its change id.
func markerStep(a *historypb.MarkerRecordedEventAttributes) string {
	d := a.GetDetails()
	switch a.GetMarkerName() {
	case "LocalActivity":
		var info struct{ ActivityType string }
		_ = json.Unmarshal([]byte(payloadText(d["data"])), &info)
		if a.GetFailure() != nil {
			return "local-failed:" + info.ActivityType
		}
		return "local:" + info.ActivityType + "=" + payloadText(d["result"])
	case "Version":
		var id string
		_ = json.Unmarshal([]byte(payloadText(d["change-id"])), &id)
		return "version:" + id
	}
	return "marker:" + a.GetMarkerName()
}

func payloadText(p *commonpb.Payloads) string {
	var parts []string
	for _, v := range decoded(p) {
		parts = append(parts, string(v.GetData()))
	}
	return strings.Join(parts, ",")
}
