package bench

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/app"
)

// historySample is how many of the drained sagas have their history read.
const historySample = 20

// HistoryShape is what a saga's forward path (started, order created,
// waiting for payment) left in Temporal, per saga, over a sample.
type HistoryShape struct {
	Sampled int `json:"sampled"`
	// Events is the history length; WorkflowTasks the workflow tasks
	// completed; Activities the activities scheduled; Markers the recorded
	// markers (local activities, side effects); Upserts the search
	// attribute upserts (each a visibility write).
	Events        float64 `json:"events_per_saga"`
	WorkflowTasks float64 `json:"workflow_tasks_per_saga"`
	Activities    float64 `json:"activities_per_saga"`
	Markers       float64 `json:"markers_per_saga"`
	Upserts       float64 `json:"upserts_per_saga"`
}

// historyShape reads the histories of up to historySample started sagas.
func (e *orderEnv) historyShape(ctx context.Context) (*HistoryShape, error) {
	e.mu.Lock()
	wids := append([]string(nil), e.startedIDs[:min(historySample, len(e.startedIDs))]...)
	e.mu.Unlock()
	h := &HistoryShape{}
	for _, wid := range wids {
		it := e.conns.Temporal.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", wid, err)
			}
			h.Events++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				h.WorkflowTasks++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				h.Activities++
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				h.Markers++
			case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
				h.Upserts++
			}
		}
		h.Sampled++
	}
	if h.Sampled > 0 {
		n := float64(h.Sampled)
		h.Events, h.WorkflowTasks, h.Activities, h.Markers, h.Upserts = h.Events/n, h.WorkflowTasks/n, h.Activities/n, h.Markers/n, h.Upserts/n
	}
	return h, nil
}

// temporalRequests is the count of gRPC requests the Temporal SDK's client
// in this process has made (its temporal_request and temporal_long_request
// counters, every operation). The SDK reports its metrics once a second:
// this waits one report so the last second's requests are in.
func temporalRequests(tel *app.Telemetry) float64 {
	time.Sleep(1100 * time.Millisecond) // the SDK's metrics report interval (temporalx), no event to await
	return counterValue(tel.Registry, "temporal_request_total", nil) + counterValue(tel.Registry, "temporal_long_request_total", nil)
}
