package workflows

import (
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/temporalx"
)

// devCodec is the payload codec of the development key (SECKILL_PAYLOAD_SECRETS'
// default), which the dev server's sagas are recorded under. Histories
// recorded before payloads were encrypted hold plain payloads, which it
// passes through: both replay (docs/operations.md, "Payload encryption").
var devCodec = sync.OnceValues(func() (*temporalx.Codec, error) {
	f, _ := reflect.TypeFor[config.Config]().FieldByName("PayloadSecrets")
	return temporalx.CodecFor(config.Config{PayloadSecrets: strings.Split(f.Tag.Get("envDefault"), ","), PayloadKeyVersion: 1})
})

// newReplayer is a replayer with the codec data converter every worker uses.
func newReplayer(t *testing.T) worker.WorkflowReplayer {
	t.Helper()
	c, err := devCodec()
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: c.DataConverter()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decoded returns p's payloads decrypted (a plain payload as it is).
func decoded(p *commonpb.Payloads) []*commonpb.Payload {
	c, err := devCodec()
	if err != nil {
		return p.GetPayloads()
	}
	out, err := c.Decode(p.GetPayloads())
	if err != nil {
		return p.GetPayloads()
	}
	return out
}

// encryptPayloads encodes, in place, every Payloads message under m as the
// workers' data converter would have.
func encryptPayloads(t *testing.T, c *temporalx.Codec, m protoreflect.Message) {
	t.Helper()
	if ps, ok := m.Interface().(*commonpb.Payloads); ok {
		enc, err := c.Encode(ps.GetPayloads())
		if err != nil {
			t.Fatal(err)
		}
		ps.Payloads = enc
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				encryptPayloads(t, c, mv.Message())
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				encryptPayloads(t, c, v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			encryptPayloads(t, c, v.Message())
		}
		return true
	})
}

// A saga recorded with encryption on (here: a recorded plain history with
// every payload encrypted under the development key) replays through the
// codec, and not without it: the replayers above do decode.
func TestReplayEncryptedHistory(t *testing.T) {
	const f = "testdata/saga_paid.json"
	raw, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	h := &historypb.History{}
	if err := protojson.Unmarshal(raw, h); err != nil {
		t.Fatal(err)
	}
	c, err := devCodec()
	if err != nil {
		t.Fatal(err)
	}
	encryptPayloads(t, c, h.ProtoReflect())
	start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	if string(start.GetMetadata()["encoding"]) != temporalx.EncodingEncrypted {
		t.Fatalf("start input not encrypted: %v", start.GetMetadata())
	}
	r := newReplayer(t)
	r.RegisterWorkflow(ReservationSaga)
	if err := r.ReplayWorkflowHistory(nil, h); err != nil {
		t.Fatalf("encrypted history through the codec: %v", err)
	}
	plain := worker.NewWorkflowReplayer()
	plain.RegisterWorkflow(ReservationSaga)
	if err := plain.ReplayWorkflowHistory(nil, h); err == nil {
		t.Fatal("encrypted history replayed without the codec: the test does not reach the payloads")
	}
}
