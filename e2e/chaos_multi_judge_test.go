package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/workflows"
)

// payOrders has the buyers of up to n orders pay them through the last
// gateway (the survivor); an order that expired first is cancelled instead.
func (c *Cluster) payOrders(ctx context.Context, s *Sale, n int) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	base := func() string { return c.apiBases[len(c.apiBases)-1] }
	rows, err := c.Pool.Query(ctx, `SELECT order_id, user_id FROM orders WHERE activity_id = $1 AND status = 'CREATED'
		ORDER BY created_at DESC LIMIT $2`, s.ActivityID, n)
	if err != nil {
		return err
	}
	type order struct {
		id   uuid.UUID
		user int64
	}
	var orders []order
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.id, &o.user); err != nil {
			rows.Close()
			return err
		}
		orders = append(orders, o)
	}
	rows.Close()
	for _, o := range orders {
		if err := c.payOrder(ctx, hc, base, o.id, o.user); err != nil {
			return err
		}
	}
	return nil
}

// judgeMulti checks, on the settled sale, that every lease and message took
// effect once, and what the survivors took over from the killed replicas.
func (c *Cluster) judgeMulti(ctx context.Context, rep *MultiReport, b *burst, o MultiOptions) error {
	bad := func(format string, a ...any) { rep.Violations = append(rep.Violations, fmt.Sprintf(format, a...)) }
	seen := func(format string, a ...any) {
		line := fmt.Sprintf(format, a...)
		rep.Observed = append(rep.Observed, line)
		fmt.Fprintln(o.Progress, "chaos: observed: "+line)
	}
	killedAt := map[string]time.Time{}
	for _, k := range rep.Kills {
		killedAt[k.Proc] = k.At
	}
	if err := c.judgeRows(ctx, rep, b, killedAt, bad, seen); err != nil {
		return err
	}
	if err := c.judgeLeases(ctx, rep, bad, seen); err != nil {
		return err
	}
	return c.judgeSagas(ctx, rep, b, killedAt, bad, seen)
}

// judgeRows checks the PostgreSQL rows of the sale: one reservation per
// admitted reservation and per user, one inbox row per message, one
// compensation task (applied) per rejected reservation, one ledger row per
// movement, every outbox event sent once; and the survivors' share.
func (c *Cluster) judgeRows(ctx context.Context, rep *MultiReport, b *burst, killedAt map[string]time.Time,
	bad, seen func(string, ...any)) error {
	id := rep.Sale.ActivityID
	var rids []uuid.UUID
	for rid := range b.admitted {
		u, err := uuid.Parse(rid)
		if err != nil {
			bad("202 answer with reservation id %q", rid)
			continue
		}
		rids = append(rids, u)
	}
	var x struct {
		resv, known, dupUsers, inbox, inboxIDs, rejected, tasks, taskRes, applied, reclaimed, dupLedger int
	}
	if err := c.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND reservation_id = ANY($2)),
		(SELECT count(*) FROM (SELECT user_id FROM inventory_reservation WHERE activity_id = $1 GROUP BY user_id HAVING count(*) > 1) d),
		(SELECT count(*) FROM consumer_inbox i JOIN inventory_reservation r USING (message_id) WHERE r.activity_id = $1),
		(SELECT count(DISTINCT (i.consumer_group, i.message_id)) FROM consumer_inbox i JOIN inventory_reservation r USING (message_id)
		  WHERE r.activity_id = $1 GROUP BY i.consumer_group ORDER BY 1 LIMIT 1),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'COMPENSATED'),
		(SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1),
		(SELECT count(DISTINCT t.reservation_id) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1),
		(SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1 AND t.status IN ('APPLIED', 'VERIFIED')),
		(SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1 AND t.attempt_count > 1),
		(SELECT count(*) FROM (SELECT 1 FROM inventory_ledger WHERE activity_id = $1 GROUP BY reservation_id, change_type HAVING count(*) > 1) d)`,
		id, rids).Scan(&x.resv, &x.known, &x.dupUsers, &x.inbox, &x.inboxIDs, &x.rejected, &x.tasks, &x.taskRes, &x.applied, &x.reclaimed, &x.dupLedger); err != nil {
		return fmt.Errorf("judge rows: %w", err)
	}
	if x.resv != rep.Admitted || x.known != len(rids) {
		bad("reservations: %d in PostgreSQL, %d of the %d admitted ones", x.resv, x.known, rep.Admitted)
	}
	if x.dupUsers > 0 {
		bad("reservations: %d users hold more than one", x.dupUsers)
	}
	// Two consumers keep an inbox: the saga starter and the order creation.
	if x.inbox != 2*x.resv || x.inboxIDs != x.resv {
		bad("inbox: %d rows, the fewest of a consumer group %d, for %d reservations (want one per group each)", x.inbox, x.inboxIDs, x.resv)
	}
	if x.tasks != x.rejected || x.taskRes != x.rejected || x.applied != x.rejected {
		bad("compensation: %d tasks (%d reservations, %d applied) for %d compensated reservations", x.tasks, x.taskRes, x.applied, x.rejected)
	}
	if x.dupLedger > 0 {
		bad("ledger: %d stock movements recorded more than once", x.dupLedger)
	}
	seen("%d reservations, %d rejected and compensated once each; %d compensation tasks claimed more than once (a lease taken over)",
		x.resv, x.rejected, x.reclaimed)
	return c.judgeOutbox(ctx, rep, killedAt, bad, seen)
}

// judgeOutbox waits until every outbox row of the run is sent (a row the
// killed relay held comes back when its lease expires), checks one row per
// event, and that the surviving relay sent some after the kill.
func (c *Cluster) judgeOutbox(ctx context.Context, rep *MultiReport, killedAt map[string]time.Time, bad, seen func(string, ...any)) error {
	var unsent, events, keys, after int
	deadline := time.Now().Add(2 * time.Minute)
	restKill := killedAt[c.Replicas(ProcRest)[0].Name]
	for {
		if err := c.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'SENT'), count(*),
			count(DISTINCT (aggregate_id, event_type)), count(*) FILTER (WHERE sent_at > $2)
			FROM event_outbox WHERE created_at > $1`, rep.Sale.Started, restKill).Scan(&unsent, &events, &keys, &after); err != nil {
			return fmt.Errorf("judge outbox: %w", err)
		}
		if unsent == 0 || time.Now().After(deadline) {
			break
		}
		if err := waitGone(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	if unsent > 0 {
		bad("outbox: %d of %d events still unsent 2m after the sale settled", unsent, events)
	}
	if keys != events {
		bad("outbox: %d rows for %d distinct events", events, keys)
	}
	if after == 0 {
		bad("outbox: no event sent after %s was killed: the surviving relay did nothing", c.Replicas(ProcRest)[0].Name)
	}
	survivor := c.Replicas(ProcRest)[1]
	m, err := scrape(ctx, survivor.metrics)
	if err != nil {
		return fmt.Errorf("metrics of %s: %w", survivor.Name, err)
	}
	seen("%d outbox events, each sent once; %d sent after the kill of the relay, by %s, which reclaimed %v expired leases",
		events, after, survivor.Name, m[`seckill_outbox_lease_expired_total`])
	seen("%s's send-due scanner re-sent %v reservation messages (%v published)", survivor.Name,
		m[`seckill_reservation_resend_total`], m[`seckill_reservation_send_total{result="published",source="scanner"}`])
	if rep.Failover == 0 {
		bad("gateways: no request meant for the killed gateway went to the other")
	}
	seen("%d requests meant for a gateway that was down (or cut off by its kill) answered by the other", rep.Failover)
	return nil
}

// judgeSagas checks one saga (one run of the fixed workflow id) per
// reservation, and from the sagas' histories (the identity of every worker
// and client is pid@host) which starter started each and which saga
// workers ran it: some saga started on the killed worker must have finished
// on the survivor, and the surviving starter must have started sagas after
// the other's kill.
func (c *Cluster) judgeSagas(ctx context.Context, rep *MultiReport, b *burst, killedAt map[string]time.Time, bad, seen func(string, ...any)) error {
	runs := map[string]int{}
	query := fmt.Sprintf(`ActivityId = %d`, rep.Sale.ActivityID)
	for token := []byte(nil); ; {
		resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list sagas: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			runs[e.GetExecution().GetWorkflowId()]++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	byPid := map[string]string{}
	for name, p := range c.Procs {
		for _, pid := range p.Pids() {
			byPid[strconv.Itoa(pid)] = name
		}
	}
	starter1, starter2 := c.Replicas(ProcStarter)[0].Name, c.Replicas(ProcStarter)[1].Name
	saga1, saga2 := c.Replicas(ProcSaga)[0].Name, c.Replicas(ProcSaga)[1].Name
	started := map[string]int{}
	var afterKill, movedOver int
	for rid := range b.admitted {
		wid := workflows.ReservationWorkflowID(rid)
		if runs[wid] != 1 {
			bad("sagas: %d runs of %s (want exactly one)", runs[wid], wid)
			continue
		}
		h, err := c.sagaHistory(ctx, wid, byPid)
		if err != nil {
			return err
		}
		started[h.starter]++
		if h.starter == starter2 && h.startedAt.After(killedAt[starter1]) {
			afterKill++
		}
		if h.ranOn[saga1] && h.ranOn[saga2] {
			movedOver++
		}
	}
	seen("sagas started by starter: %v; %d by %s after %s was killed", started, afterKill, starter2, starter1)
	seen("%d sagas ran on %s and, after its kill, went on on %s", movedOver, saga1, saga2)
	if started[starter1] == 0 || afterKill == 0 {
		bad("starters: %s started %d sagas before its kill, %s %d after it (want some of each)", starter1, started[starter1], starter2, afterKill)
	}
	if movedOver == 0 {
		bad("saga workers: no saga begun on %s went on on %s after its kill", saga1, saga2)
	}
	return nil
}

// sagaRun is what a saga's history tells of the processes that ran it.
type sagaRun struct {
	starter   string
	startedAt time.Time
	ranOn     map[string]bool
}

func (c *Cluster) sagaHistory(ctx context.Context, wid string, byPid map[string]string) (sagaRun, error) {
	r := sagaRun{ranOn: map[string]bool{}}
	proc := func(identity string) string {
		pid, _, _ := strings.Cut(identity, "@")
		return byPid[pid]
	}
	it := c.Temporal.GetWorkflowHistory(ctx, wid, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return r, fmt.Errorf("history of %s: %w", wid, err)
		}
		switch {
		case e.GetWorkflowExecutionStartedEventAttributes() != nil:
			r.starter = proc(e.GetWorkflowExecutionStartedEventAttributes().GetIdentity())
			r.startedAt = e.GetEventTime().AsTime()
		case e.GetWorkflowTaskStartedEventAttributes() != nil:
			r.ranOn[proc(e.GetWorkflowTaskStartedEventAttributes().GetIdentity())] = true
		case e.GetActivityTaskStartedEventAttributes() != nil:
			r.ranOn[proc(e.GetActivityTaskStartedEventAttributes().GetIdentity())] = true
		}
	}
	return r, nil
}
