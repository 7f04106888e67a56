package flashsale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/platform/backoff"
)

// admit lets opts.Buyers buyers race for the stock, opts.Concurrency at a
// time, and counts their answers; with opts.Disrupt, runs it at half way.
func (r *Report) admit(ctx context.Context, client *http.Client, mint func(int64, time.Duration) (string, error), base string, opts Options) error {
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var answered atomic.Int64
	d := newDisruption(ctx, opts)
	if opts.DisruptInPayments {
		d = newDisruption(ctx, Options{})
	}
	stopBar := make(chan struct{})
	barDone := make(chan struct{})
	go func() { // the admission bar
		defer close(barDone)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopBar:
				return
			case <-t.C:
				opts.prog.update("admission", answered.Load(), int64(opts.Buyers), "buyers answered")
			}
		}
	}()
	jobs := make(chan int)
	for range opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range jobs {
				code := buy(ctx, client, mint, base, opts.ActivityID, int64(u), opts.RetryUnavailable)
				mu.Lock()
				r.HTTP[code]++
				if code == http.StatusAccepted && d.over() {
					r.AcceptedAfterDisrupt++
				}
				mu.Unlock()
				if answered.Add(1) == int64(opts.Buyers/2) {
					d.start()
				}
			}
		}()
	}
	for u := 1; u <= opts.Buyers; u++ {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	close(stopBar)
	<-barDone
	r.AdmitTime = time.Since(start)
	r.Accepted = r.HTTP[http.StatusAccepted]
	opts.prog.update("admission", answered.Load(), int64(opts.Buyers), "buyers answered")
	opts.prog.printf("admission done in %s: %v (202 = QUEUED, 409 = sold out)\n", r.AdmitTime.Round(time.Millisecond), r.HTTP)
	var err error
	r.DisruptTime, err = d.wait()
	return err
}

func buy(ctx context.Context, c *http.Client, mint func(int64, time.Duration) (string, error), base string, activityID, user int64, retryFor time.Duration) int {
	tok, err := mint(user, time.Hour)
	if err != nil {
		return -1
	}
	url := fmt.Sprintf("%s/v1/activities/%d/skus/%d/reservations", base, activityID, SKUID)
	key := uuid.NewString()
	until := time.Now().Add(retryFor)
	for attempt := 0; attempt < 3 || time.Now().Before(until); attempt++ { // a client retries with the same Idempotency-Key
		if attempt >= 3 && backoff.Sleep(ctx, 200*time.Millisecond) != nil {
			break
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", key)
		resp, err := c.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return resp.StatusCode
		}
	}
	return -1
}
