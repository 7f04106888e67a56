package flashsale

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/google/uuid"

	"github.com/seckill/seckill/app"
)

// Outcome is how many purchases of the sale ended one way, where the
// Temporal UI lists exactly those sagas, and one of them to explain.
type Outcome struct {
	Name    string
	Count   int64
	Query   string     // the Temporal visibility query of those sagas
	Example *uuid.UUID // a reservation that ended this way (seckill explain <id>)
}

// outcomeSQL counts each final outcome of activity $1 with one example.
const outcomeSQL = `
WITH o AS (
  SELECT CASE
      WHEN d.status = 'PAID' THEN 'paid'
      WHEN d.status = 'REFUNDED' THEN 'refunded'
      WHEN d.status = 'CANCELLED' THEN 'cancelled'
      WHEN r.status = 'COMPENSATED' THEN 'compensated'
      WHEN r.status = 'MANUAL_REVIEW' THEN 'manual'
      ELSE 'other' END AS outcome, r.reservation_id
  FROM inventory_reservation r LEFT JOIN orders d ON d.reservation_id = r.reservation_id
  WHERE r.activity_id = $1)
SELECT outcome, count(*), (array_agg(reservation_id ORDER BY reservation_id))[1] FROM o GROUP BY outcome`

// outcomeQueries are the visibility queries of each outcome (the saga's
// ReservationStatus search attribute; a refund runs in its own workflow).
var outcomeQueries = map[string]string{
	"paid":        `ReservationStatus = "PAID"`,
	"cancelled":   `ReservationStatus = "CANCELLED"`,
	"refunded":    `WorkflowType = "RefundWorkflow"`,
	"compensated": `ReservationStatus = "COMPENSATED"`,
	"manual":      `ReservationStatus = "MANUAL_REVIEW"`,
}

// outcomeOrder is the order of the table.
var outcomeOrder = []string{"paid", "cancelled", "refunded", "compensated", "manual", "other"}

func (r *Report) countOutcomes(ctx context.Context, conns *app.Conns) error {
	rows, err := conns.Pool.Query(ctx, outcomeSQL, r.ActivityID)
	if err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	defer rows.Close()
	got := map[string]Outcome{}
	for rows.Next() {
		var o Outcome
		var ex uuid.UUID
		if err := rows.Scan(&o.Name, &o.Count, &ex); err != nil {
			return fmt.Errorf("count outcomes: %w", err)
		}
		o.Example = &ex
		got[o.Name] = o
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	r.Outcomes = r.Outcomes[:0]
	for _, name := range outcomeOrder {
		o, ok := got[name]
		if !ok {
			if name == "other" {
				continue
			}
			o = Outcome{Name: name}
		}
		if q, ok := outcomeQueries[name]; ok {
			o.Query = fmt.Sprintf("ActivityId = %d AND %s", r.ActivityID, q)
		}
		r.Outcomes = append(r.Outcomes, o)
	}
	return nil
}

// printOutcomes writes the table of outcomes with their UI links.
func (r Report) printOutcomes(w io.Writer) {
	if len(r.Outcomes) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-12s %6s  %-40s %s\n", "outcome", "count", "explain one", "Temporal UI: exactly those sagas")
	for _, o := range r.Outcomes {
		ex, link := "-", "-"
		if o.Example != nil && o.Count > 0 {
			ex = "seckill explain " + o.Example.String()
		}
		if o.Query != "" && r.UI != "" {
			link = fmt.Sprintf("%s/namespaces/%s/workflows?query=%s", r.UI, url.PathEscape(r.Namespace), url.QueryEscape(o.Query))
		}
		fmt.Fprintf(w, "%-12s %6d  %-40s %s\n", o.Name, o.Count, ex, link)
	}
}
