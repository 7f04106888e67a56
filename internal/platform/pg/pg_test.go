package pg

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestHostsNamesEveryHostOfAMultiHostDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:p@127.0.0.1:15441,127.0.0.1:15442/db?target_session_attrs=read-write": "127.0.0.1:15441,127.0.0.1:15442",
		"postgres://u:p@127.0.0.1:15432/db":                                                 "127.0.0.1:15432",
	} {
		c, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := hosts(c); got != want {
			t.Errorf("hosts(%s) = %q, want %q", dsn, got, want)
		}
	}
}
