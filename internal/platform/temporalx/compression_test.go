package temporalx

import (
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/platform/config"
)

// SECKILL_TEMPORAL_COMPRESSION picks the client's gRPC compression: none
// turns the SDK's default gzip off, gzip leaves the SDK's default.
func TestCompressionSettingReachesTheClient(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	for _, c := range []struct {
		value string
		none  bool
	}{{"none", true}, {"gzip", false}} {
		t.Setenv("SECKILL_TEMPORAL_COMPRESSION", c.value)
		cfg, err := config.Load()
		if err != nil {
			t.Fatal(err)
		}
		o, err := clientOptions(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, none := o.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone)
		if none != c.none || (!c.none && o.ConnectionOptions.GrpcCompression != nil) {
			t.Errorf("SECKILL_TEMPORAL_COMPRESSION=%s: GrpcCompression = %#v", c.value, o.ConnectionOptions.GrpcCompression)
		}
	}
}
