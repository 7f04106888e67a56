package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The typed layer: one function per script, with typed arguments and a typed
// reply. Each XArgs renders its call's KEYS and ARGV in the order of the
// script's header (Render), so no caller spells those lists out. Points in
// time are Unix milliseconds, as the scripts store them; spans are
// time.Duration, sent as milliseconds.

// ErrBadReply is wrapped by every error about a script reply that does not
// have the shape the script's header documents.
var ErrBadReply = errors.New("unexpected script reply")

func badReply(script string, reply any, format string, a ...any) error {
	return fmt.Errorf("%s: %w %#v: %s", script, ErrBadReply, reply, fmt.Sprintf(format, a...))
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func run[R any](ctx context.Context, rdb redis.Scripter, s *redis.Script, name string, keys []string, argv []any,
	parse func(any) (R, error)) (R, error) {
	v, err := s.Run(ctx, rdb, keys, argv...).Result()
	if err != nil {
		var zero R
		return zero, fmt.Errorf("%s: %w", name, err)
	}
	return parse(v)
}

// array checks the reply is an array of n elements or more.
func array(script string, v any, n int) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, badReply(script, v, "not an array")
	}
	if len(a) < n {
		return nil, badReply(script, v, "%d elements, want %d", len(a), n)
	}
	return a, nil
}

func int64At(script string, v any, a []any, i int) (int64, error) {
	n, ok := a[i].(int64)
	if !ok {
		return 0, badReply(script, v, "element %d is %T, want an integer", i+1, a[i])
	}
	return n, nil
}

func stringAt(script string, v any, a []any, i int) (string, error) {
	s, ok := a[i].(string)
	if !ok {
		return "", badReply(script, v, "element %d is %T, want a string", i+1, a[i])
	}
	return s, nil
}

// codeText parses the {code, text} replies; known reports the script's codes.
func codeText(script string, v any, known func(int64) bool) (int64, string, error) {
	a, err := array(script, v, 2)
	if err != nil {
		return 0, "", err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return 0, "", err
	}
	if !known(code) {
		return 0, "", badReply(script, v, "unknown code %d", code)
	}
	text, err := stringAt(script, v, a, 1)
	if err != nil {
		return 0, "", err
	}
	return code, text, nil
}

func name[C ~int64](names map[C]string, c C) string {
	if n, ok := names[c]; ok {
		return n
	}
	return "code(" + strconv.FormatInt(int64(c), 10) + ")"
}

func known[C ~int64](names map[C]string) func(int64) bool {
	return func(c int64) bool { _, ok := names[C(c)]; return ok }
}
