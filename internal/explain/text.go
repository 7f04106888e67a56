package explain

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteText prints the report for people: who it is, each side's status,
// the timeline oldest first, the saga, and the verdict.
func (rep Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: reservation %s, sale %d, SKU %d", rep.Kind, rep.ID, rep.ReservationID, rep.ActivityID, rep.SKUID)
	if rep.Bucket > 0 {
		fmt.Fprintf(&b, ", stock bucket %d", rep.Bucket)
	}
	b.WriteString("\n")
	if rep.OrderID != nil {
		fmt.Fprintf(&b, "order %s\n", *rep.OrderID)
	}
	st := rep.Status
	fmt.Fprintf(&b, "\nstatus: PostgreSQL reservation %s", reservationText(st.Reservation))
	if st.Reason != "" {
		fmt.Fprintf(&b, " (%s)", st.Reason)
	}
	if !st.Order.IsZero() {
		fmt.Fprintf(&b, ", order %s", st.Order)
	}
	if !st.Compensation.IsZero() {
		fmt.Fprintf(&b, ", compensation task %s", st.Compensation)
	}
	fmt.Fprintf(&b, "; Redis %s\n", st.Redis)
	writeRedis(&b, rep.Redis)
	b.WriteString("\ntimeline (oldest first):\n")
	for _, e := range rep.Timeline {
		fmt.Fprintf(&b, "  %s  %-22s %s\n", e.At.UTC().Format("2006-01-02 15:04:05.000"), e.Source, e.What)
	}
	writeSaga(&b, rep)
	writeVerdict(&b, rep.Verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRedis(b *strings.Builder, r Redis) {
	if len(r.Hash) > 0 {
		keys := make([]string, 0, len(r.Hash))
		for k := range r.Hash {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(b, "redis hash (expires in %s):", r.HashTTL.Round(time.Second))
		for _, k := range keys {
			fmt.Fprintf(b, " %s=%s", k, r.Hash[k])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "redis request map %s, user guard %s", orAbsent(r.RequestMap), orAbsent(r.UserGuard))
	if r.SendDueAt != nil {
		fmt.Fprintf(b, ", in send_due (due %s)", r.SendDueAt.Format(time.RFC3339))
	}
	fmt.Fprintf(b, ", compensation marker %s, release marker %s\n", orAbsent(r.CompensationMarker), orAbsent(r.ReleaseMarker))
}

func writeSaga(b *strings.Builder, rep Report) {
	switch {
	case rep.SagaError != "":
		fmt.Fprintf(b, "\nsaga: Temporal could not be asked: %s\n", rep.SagaError)
	case rep.Saga == nil:
		b.WriteString("\nsaga: not asked (no Temporal client)\n")
	default:
		s := rep.Saga
		fmt.Fprintf(b, "\nsaga %s run %s: %s", s.WorkflowID, orAbsent(s.RunID), s.Status)
		if s.Step != "" {
			fmt.Fprintf(b, ", %s", s.Step)
		}
		b.WriteString("\n")
		for _, p := range s.Pending {
			fmt.Fprintf(b, "  pending %s attempt %d", p.Activity, p.Attempt)
			if p.LastFailure != "" {
				fmt.Fprintf(b, ", last failure: %s", p.LastFailure)
			}
			b.WriteString("\n")
		}
	}
}

func writeVerdict(b *strings.Builder, v Verdict) {
	if v.Consistent {
		fmt.Fprintf(b, "\nverdict: consistent (%s)\n", v.Note)
		return
	}
	b.WriteString("\nverdict: NOT consistent\n")
	for _, p := range v.Problems {
		fmt.Fprintf(b, "  %s: %s\n", p.Invariant, p.Detail)
	}
	if v.Action != "" {
		fmt.Fprintf(b, "repair: %s\n  %s\n", v.Action, v.Command)
	}
}

func orAbsent(s string) string {
	if s == "" {
		return Absent
	}
	return s
}
