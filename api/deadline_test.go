package api

import (
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// Every route runs under exactly one deadline (the route's budget or the
// handler timeout), set before anything else of the route: a route without
// one could hang on a dependency, and two cost a timer and a request copy
// each on the hot path.
func TestEveryRouteHasOneDeadline(t *testing.T) {
	mx, ok := NewRouter(Deps{Limits: Limits{PerIP: 1, PerUser: 1, ReadPerUser: 1, Callback: 1, Admin: 1, Window: time.Second}}).(*chi.Mux)
	if !ok {
		t.Fatal("NewRouter does not return a *chi.Mux")
	}
	deadlineFn := funcName(deadline(time.Second).bound)
	routes := 0
	err := chi.Walk(mx, func(method, route string, _ http.Handler, mws ...func(http.Handler) http.Handler) error {
		routes++
		var at []int
		for i, mw := range mws {
			if funcName(mw) == deadlineFn {
				at = append(at, i)
			}
		}
		// The request id and the recoverer come first, for every route.
		if len(at) != 1 || at[0] != 3 {
			t.Errorf("%s %s: deadlines at %v of its %d middlewares, want one, right after the request id and recoverer", method, route, at, len(mws))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if routes < 10 {
		t.Fatalf("walked %d routes, want every route of the API", routes)
	}
}

func funcName(f any) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	return strings.TrimSuffix(name, "-fm")
}
