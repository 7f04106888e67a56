package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/sale"
)

// KindMulti is the kind of cluster of the multi-process test (two of each
// process): topics, Redis database and lock of its own, apart from the
// crash-point matrix's.
var KindMulti = Kind{Name: "multi", RedisDB: 9}

// MultiOptions shape a burst on a cluster of several replicas of each
// process (ClusterOptions.Replicas ≥ 2) with one replica of each kind
// killed mid-burst.
type MultiOptions struct {
	Users      int // buyers (default 80)
	RedisStock int // units on sale in Redis (default Users/2)
	PGStock    int // units in PostgreSQL (default RedisStock*4/5: the rest is rejected and compensated)
	// Every paces the burst: one request is sent every Every (default 30ms),
	// at most Concurrency in flight (default 8).
	Every       time.Duration
	Concurrency int
	Pay         int           // orders paid after the burst (default 3)
	Settle      time.Duration // bound on settling after the last kill (default 3m)
	Progress    io.Writer
}

func (o MultiOptions) withDefaults() MultiOptions {
	if o.Users <= 0 {
		o.Users = 80
	}
	if o.RedisStock <= 0 {
		o.RedisStock = o.Users / 2
	}
	if o.PGStock <= 0 {
		o.PGStock = o.RedisStock * 4 / 5
	}
	if o.Every <= 0 {
		o.Every = 30 * time.Millisecond
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Pay <= 0 {
		o.Pay = 3
	}
	if o.Settle <= 0 {
		o.Settle = 3 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// Killed is one SIGKILL of a replica.
type Killed struct {
	Proc      string
	Pid       int
	At        time.Time
	When      string // the condition awaited before the kill
	MidBurst  bool   // the burst was still sending
	Condition bool   // false: the burst ended before the condition held (killed at its end)
	Lease     string // the row whose lease it held when killed ("" if none was caught)
	// LeaseAttempt is the lease's attempt the kill ended.
	LeaseAttempt int
}

// MultiReport is what became of a multi-process burst.
type MultiReport struct {
	Sale     *Sale
	Requests int
	Answers  map[int]int // HTTP status → count
	Admitted int         // distinct reservations answered 202
	Failover int         // requests meant for a gateway that was down, sent to the other
	Kills    []Killed
	// Observed names what the survivors took over (evidence, and the
	// assertions' inputs); Violations what does not hold.
	Observed   []string
	Violations []string
	Duration   time.Duration
}

// burstJob is one request of the burst: a user, its Idempotency-Key and the
// gateway it goes to first.
type burstJob struct {
	user int64
	key  string
	gw   int
}

// burst is the state of the burst while it runs.
type burst struct {
	mu       sync.Mutex
	answers  map[int]int
	rids     map[string]map[string]bool // Idempotency-Key → reservation ids answered 202
	admitted map[string]bool
	errs     []string
	failover atomic.Int64
	sending  atomic.Bool
}

// jobs plans the burst: each user's request to gateway user%n; every second
// user sends a duplicate (same key) to the other gateway, every third one to
// the same gateway, every fifth a second request with a key of its own. The
// order is shuffled, so some duplicates race their original.
func planBurst(users, gateways int) []burstJob {
	var jobs []burstJob
	for u := int64(1); u <= int64(users); u++ {
		key, gw := uuid.NewString(), int(u)%gateways
		jobs = append(jobs, burstJob{u, key, gw})
		if u%2 == 0 {
			jobs = append(jobs, burstJob{u, key, (gw + 1) % gateways})
		}
		if u%3 == 0 {
			jobs = append(jobs, burstJob{u, key, gw})
		}
		if u%5 == 0 {
			jobs = append(jobs, burstJob{u, uuid.NewString(), (gw + 1) % gateways})
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] }) // #nosec G404 -- test traffic
	return jobs
}

// Multi plays one sale on the cluster (started, Replicas ≥ 2) as a paced
// burst spread over the gateways, SIGKILLs replica 1 of every process kind
// mid-burst (each at an awaited condition) and leaves it down, lets the
// survivors converge, then judges the invariants, the exactly-once effects
// of every lease and message, and what the survivors took over.
func Multi(ctx context.Context, c *Cluster, o MultiOptions) (MultiReport, error) {
	o = o.withDefaults()
	rep := MultiReport{Answers: map[int]int{}}
	if c.replicas < 2 {
		return rep, fmt.Errorf("chaos: Multi needs a cluster of 2 or more replicas, this one has %d", c.replicas)
	}
	start := time.Now()
	s := &Sale{ActivityID: start.UnixMilli(), Started: start, Codes: map[int]int{}}
	rep.Sale = s
	if err := c.setUpSale(ctx, s, o); err != nil {
		return rep, err
	}
	b := &burst{answers: map[int]int{}, rids: map[string]map[string]bool{}, admitted: map[string]bool{}}
	b.sending.Store(true)
	kills := make(chan Killed, 4)
	var kwg sync.WaitGroup
	for _, step := range c.killPlan(s, b, o) {
		kwg.Add(1)
		go func() {
			defer kwg.Done()
			k, err := c.killWhen(ctx, s, b, step)
			if err != nil {
				k.When += " (error: " + err.Error() + ")"
			}
			kills <- k
		}()
	}
	jobs := planBurst(o.Users, len(c.apiBases))
	c.runBurst(ctx, s, b, jobs, o)
	b.sending.Store(false)
	kwg.Wait()
	close(kills)
	for k := range kills {
		rep.Kills = append(rep.Kills, k)
		fmt.Fprintf(o.Progress, "chaos: killed %s (pid %d) at %s after %q (mid-burst %v)\n", k.Proc, k.Pid,
			k.At.Sub(start).Round(10*time.Millisecond), k.When, k.MidBurst)
	}
	rep.Requests, rep.Failover, rep.Answers = len(jobs), int(b.failover.Load()), b.answers
	rep.Admitted = len(b.admitted)
	rep.Violations = append(rep.Violations, b.errs...)
	rep.Violations = append(rep.Violations, b.idempotencyViolations()...)
	// Settled counts what the gateways admitted: one per reservation, not per answer.
	s.Codes = map[int]int{http.StatusAccepted: rep.Admitted}
	fmt.Fprintf(o.Progress, "chaos: burst of %d requests done in %s: answers %v, %d admitted, %d failovers\n",
		len(jobs), time.Since(start).Round(10*time.Millisecond), b.answers, rep.Admitted, rep.Failover)
	if err := c.payOrders(ctx, s, o.Pay); err != nil {
		rep.Violations = append(rep.Violations, "paying: "+err.Error())
	}
	if err := c.AwaitSettled(ctx, s, o.Settle); err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Progress, "chaos: settled %s after the start (%s after the last kill)\n",
		time.Since(start).Round(100*time.Millisecond), s.ConvergeTime().Round(100*time.Millisecond))
	rep.Violations = append(rep.Violations, s.Violations...)
	if err := c.judgeMulti(ctx, &rep, b, o); err != nil {
		return rep, err
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// setUpSale creates the sale on a gateway and lowers its PostgreSQL stock
// (the reservations beyond it are rejected and their units compensated).
func (c *Cluster) setUpSale(ctx context.Context, s *Sale, o MultiOptions) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	now := time.Now()
	def := sale.Activity{ActivityID: s.ActivityID, Name: fmt.Sprintf("multi %d", s.ActivityID), StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: 3, OrderDeadlineSeconds: 60,
		SKUs: []sale.SKU{{SKUID: saleSKU, Stock: int64(o.RedisStock), PriceCents: 1000}}}
	if _, err := c.call(ctx, hc, http.MethodPost, "/v1/admin/activities", c.cfg.AdminToken, "", def, http.StatusOK); err != nil {
		return fmt.Errorf("sale set-up: %w", err)
	}
	if _, err := c.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = $3, available_stock = $3 WHERE activity_id = $1 AND sku_id = $2`,
		s.ActivityID, saleSKU, o.PGStock); err != nil {
		return fmt.Errorf("lower PostgreSQL stock: %w", err)
	}
	return nil
}

// runBurst sends the jobs, one every o.Every, at most o.Concurrency in
// flight. A request whose gateway is down goes to the next one, and a
// request cut off by a kill is retried there with the same key.
func (c *Cluster) runBurst(ctx context.Context, s *Sale, b *burst, jobs []burstJob, o MultiOptions) {
	gws := c.Replicas(ProcAPI)
	hc := &http.Client{Timeout: 5 * time.Second}
	sem := make(chan struct{}, o.Concurrency)
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	var wg sync.WaitGroup
	path := fmt.Sprintf("/v1/activities/%d/skus/%d/reservations", s.ActivityID, saleSKU)
	for _, j := range jobs {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			gw := j.gw
			base := func() string {
				for range gws {
					if gws[gw].Running() {
						break
					}
					gw = (gw + 1) % len(gws)
				}
				if gw != j.gw {
					b.failover.Add(1)
				}
				return c.apiBases[gw]
			}
			tok, err := c.auth.Mint(j.user, time.Hour)
			var out struct {
				ReservationID string `json:"reservation_id"`
			}
			code := 0
			if err == nil {
				code, err = c.callAt(ctx, hc, base, http.MethodPost, path, tok, j.key, nil, &out, http.StatusAccepted, http.StatusConflict)
			}
			b.record(j, code, out.ReservationID, err)
		}()
	}
	wg.Wait()
}

func (b *burst) record(j burstJob, code int, rid string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.errs = append(b.errs, fmt.Sprintf("user %d key %s: %v", j.user, j.key, err))
		return
	}
	b.answers[code]++
	if code == http.StatusAccepted {
		if b.rids[j.key] == nil {
			b.rids[j.key] = map[string]bool{}
		}
		b.rids[j.key][rid] = true
		b.admitted[rid] = true
	}
}

// idempotencyViolations: every 202 answer to one Idempotency-Key named the
// same reservation, whichever gateway gave it.
func (b *burst) idempotencyViolations() []string {
	var out []string
	for key, rids := range b.rids {
		if len(rids) != 1 {
			out = append(out, fmt.Sprintf("idempotency: key %s admitted as %d reservations %v", key, len(rids), rids))
		}
	}
	return out
}

// admittedIDs are the reservations answered 202 so far.
func (b *burst) admittedIDs() []uuid.UUID {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []uuid.UUID
	for rid := range b.admitted {
		if u, err := uuid.Parse(rid); err == nil {
			out = append(out, u)
		}
	}
	return out
}

func (b *burst) admittedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.admitted)
}

// killStep is one kill of the plan: the process and the condition awaited.
type killStep struct {
	proc *Proc
	when string
	cond func(ctx context.Context) (bool, error)
	// catch, if set, reads the rows leased now: the process is killed
	// holding one of them (catchLease), survivor frozen meanwhile.
	catch    string
	survivor *Proc
}

// killWhen waits until the step's condition holds (or the burst has ended
// and the settling sale can no longer bring it), then SIGKILLs the process.
func (c *Cluster) killWhen(ctx context.Context, s *Sale, b *burst, st killStep) (Killed, error) {
	k := Killed{Proc: st.proc.Name, When: st.when}
	var lastErr error
	for deadline := time.Now().Add(90 * time.Second); ; {
		ok, err := st.cond(ctx)
		if err == nil && ok {
			k.Condition = true
			break
		}
		lastErr = err
		if time.Now().After(deadline) {
			break
		}
		if err := waitGone(ctx, 20*time.Millisecond); err != nil {
			return k, err
		}
	}
	if pids := st.proc.Pids(); len(pids) > 0 {
		k.Pid = pids[len(pids)-1]
	}
	k.MidBurst = b.sending.Load()
	if st.catch != "" {
		var err error
		k.Lease, k.LeaseAttempt, err = c.catchLease(ctx, st.proc, st.survivor, st.catch, 20*time.Second)
		k.When += caughtLease(k.Lease, err)
		k.At = time.Now()
		s.Disturb(k.At)
		return k, err
	}
	k.At = time.Now()
	s.Disturb(k.At)
	if err := st.proc.Kill(syscall.SIGKILL); err != nil {
		return k, err
	}
	if !k.Condition {
		return k, fmt.Errorf("condition never held (last error %v)", lastErr)
	}
	return k, nil
}

// killPlan kills replica 1 of each kind: the starter once a few messages
// are in the inbox; the saga worker once a few orders exist, holding a
// compensation task's lease; the rest (scanner, relay) holding an outbox
// row's lease; the gateway at half the Redis stock admitted (the burst
// still sending to it).
func (c *Cluster) killPlan(s *Sale, b *burst, o MultiOptions) []killStep {
	count := func(q string, n int) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			var got int
			err := c.Pool.QueryRow(ctx, q, s.ActivityID, s.Started).Scan(&got)
			return got >= n, err
		}
	}
	saga, rest, starter := c.Replicas(ProcSaga), c.Replicas(ProcRest), c.Replicas(ProcStarter)[0]
	base, _ := starter.sagasStarted(context.Background()) // the probes'
	return []killStep{
		{proc: starter, when: "12 messages in the starter's inbox, 3 sagas started by it", cond: func(ctx context.Context) (bool, error) {
			var got int
			if err := c.Pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE consumer_group = 'saga-starter'
				AND reservation_id = ANY($1)`, b.admittedIDs()).Scan(&got); err != nil || got < 12 {
				return false, err
			}
			n, err := starter.sagasStarted(ctx)
			return n >= base+3, err
		}},
		{proc: saga[0], when: "12 orders created", cond: count(`SELECT count(*) FROM orders WHERE activity_id = $1 AND created_at > $2`, 12),
			catch: leasedCompensations, survivor: saga[1]},
		{proc: rest[0], when: "8 orders created", cond: count(`SELECT count(*) FROM orders WHERE activity_id = $1 AND created_at > $2`, 8),
			catch: leasedOutbox, survivor: rest[1]},
		{proc: c.Replicas(ProcAPI)[0], when: "half the Redis stock admitted", cond: func(context.Context) (bool, error) {
			return b.admittedCount() >= o.RedisStock/2, nil
		}},
	}
}
