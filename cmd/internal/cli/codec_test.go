package cli

import (
	"strings"
	"testing"
)

// The codec server decrypts for anyone who reaches it: it listens on a
// loopback address or not at all.
func TestCodecServerRefusesANonLoopbackAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8234", ":8234", "10.0.0.5:8234", "localhost", "example.com:8234"} {
		cmd := newCodecServerCmd()
		cmd.SetArgs([]string{"--addr", addr})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "must be a loopback host:port") {
			t.Errorf("--addr %s: %v, want the loopback refusal", addr, err)
		}
	}
}
