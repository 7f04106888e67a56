package state_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/state"
)

// move is a state.Move with its type erased to text ("" From: inserted).
type move struct{ From, To, By string }

// column is one machine with its types erased, for checks over all of them.
type column struct {
	name   string
	table  string
	states []string
	moves  []move
}

func erase[S state.Status](name string, m state.Machine[S]) column {
	c := column{name: name, table: m.Table}
	for _, s := range m.States {
		c.states = append(c.states, s.String())
	}
	for _, mv := range m.Moves {
		c.moves = append(c.moves, move{From: mv.From.String(), To: mv.To.String(), By: mv.By})
	}
	return c
}

func columns() []column {
	return []column{
		erase("ReservationMoves", state.ReservationMoves),
		erase("RedisReservationMoves", state.RedisReservationMoves),
		erase("OrderMoves", state.OrderMoves),
		erase("PaymentMoves", state.PaymentMoves),
		erase("IntentMoves", state.IntentMoves),
		erase("CompensationMoves", state.CompensationMoves),
		erase("OutboxMoves", state.OutboxMoves),
		erase("RefundMoves", state.RefundMoves),
		erase("RepairMoves", state.RepairMoves),
	}
}

// neverWritten are statuses a CHECK allows that no code writes.
var neverWritten = map[string]bool{"CompensationMoves/VERIFIED": true}

func TestMovesAreBetweenKnownStatuses(t *testing.T) {
	for _, c := range columns() {
		seen := map[move]bool{}
		for _, mv := range c.moves {
			if mv.From != "" && !slices.Contains(c.states, mv.From) {
				t.Errorf("%s: move %s -> %s starts from an unknown status", c.name, mv.From, mv.To)
			}
			if !slices.Contains(c.states, mv.To) {
				t.Errorf("%s: move %s -> %s ends in an unknown status", c.name, mv.From, mv.To)
			}
			if seen[mv] {
				t.Errorf("%s: move %s -> %s by %s listed twice", c.name, mv.From, mv.To, mv.By)
			}
			seen[mv] = true
		}
		for _, s := range c.states {
			into := slices.ContainsFunc(c.moves, func(mv move) bool { return mv.To == s })
			if into == neverWritten[c.name+"/"+s] {
				t.Errorf("%s: status %s is reached by a move: %v, want %v", c.name, s, into, !neverWritten[c.name+"/"+s])
			}
		}
		if !slices.ContainsFunc(c.moves, func(mv move) bool { return mv.From == "" }) {
			t.Errorf("%s: no move inserts a row", c.name)
		}
	}
}

func TestAllowsAndInto(t *testing.T) {
	m := state.OrderMoves
	if !m.Allows(state.OrderCancelPending, state.OrderPaid) || m.Allows(state.OrderPaid, state.OrderCancelled) || !m.Allows(state.Order{}, state.OrderCreated) {
		t.Error("OrderMoves.Allows disagrees with its table")
	}
	var by []string
	for _, mv := range m.Into(state.OrderCancelled) {
		by = append(by, mv.By)
	}
	if want := []string{"internal/orders/orders.go Cancel"}; !slices.Equal(by, want) {
		t.Errorf("where an order becomes CANCELLED = %v, want %v", by, want)
	}
	if !m.Known(state.OrderRefunded) || m.Known(state.Order{}) {
		t.Error("OrderMoves.Known disagrees with its list")
	}
	if o, err := state.ParseOrder("SHIPPED"); err == nil {
		t.Errorf("ParseOrder(SHIPPED) = %v, want an error: SHIPPED is no order status", o)
	}
}

// TestMovesNameTheirFunctions: every move's By is a file of this module
// that defines the function it names (a Lua script needs only to exist).
func TestMovesNameTheirFunctions(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	for _, c := range columns() {
		for _, mv := range c.moves {
			file, fn, _ := strings.Cut(mv.By, " ")
			b, err := os.ReadFile(filepath.Join(root, file))
			if err != nil {
				t.Errorf("%s: %s -> %s: %v", c.name, mv.From, mv.To, err)
				continue
			}
			if strings.HasSuffix(file, ".lua") {
				continue
			}
			def := `(?m)^func (\([^)]*\) )?` + regexp.QuoteMeta(fn) + `[(\[]`
			if strings.HasSuffix(file, ".sql") {
				def = `(?m)^CREATE (OR REPLACE )?FUNCTION ` + regexp.QuoteMeta(fn) + `\(`
			}
			if fn == "" || !regexp.MustCompile(def).Match(b) {
				t.Errorf("%s: %s -> %s: %s defines no func %q", c.name, mv.From, mv.To, file, fn)
			}
		}
	}
}
