package temporalx

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/seckill/seckill/internal/testenv"
)

const codecEchoName, codecActName = "CodecEchoWorkflow", "CodecEchoActivity"

// codecEcho passes its input through an activity, as the saga passes
// SagaInput's fields to its steps.
func codecEcho(ctx workflow.Context, in sagaLike) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, codecActName, in).Get(ctx, &out)
	return out, err
}

func codecAct(_ context.Context, in sagaLike) (string, error) {
	return in.UserID + " / " + in.Reason, nil
}

// A workflow run through Dial's clients leaves no user id in its history as
// the server stores it (what the plain CLI and a codec-less UI show); the
// codec server's /decode gives it back (what the UI shows through it).
func TestHistoryIsEncryptedOnDevServer(t *testing.T) {
	cfg := testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := fmt.Sprintf("codec-test-%x", testenv.RandomUint64())
	w, err := NewWorker(c, queue, worker.Options{}, InterceptorOptions{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	w.RegisterWorkflowWithOptions(codecEcho, workflow.RegisterOptions{Name: codecEchoName})
	w.RegisterActivityWithOptions(codecAct, activity.RegisterOptions{Name: codecActName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	in := sagaLike{UserID: fmt.Sprintf("user-%x", testenv.RandomUint64()), Reason: "free text with my address"}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, codecEchoName, in)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != in.UserID+" / "+in.Reason {
		t.Fatalf("workflow result = %q, %v", got, err)
	}

	// The history as stored, through a client without the codec.
	raw, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var stored []byte
	var input *commonpb.Payloads
	it := raw.GetWorkflowHistory(ctx, queue, run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b...)
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			input = a.GetInput()
		}
	}
	if events < 5 || input == nil || len(input.GetPayloads()) != 1 {
		t.Fatalf("history has %d events, start input %v", events, input)
	}
	for _, secret := range []string{in.UserID, in.Reason} {
		if bytes.Contains(stored, []byte(secret)) {
			t.Errorf("stored history shows %q in plaintext", secret)
		}
	}
	if enc := string(input.GetPayloads()[0].GetMetadata()[converter.MetadataEncoding]); enc != EncodingEncrypted {
		t.Errorf("start input encoding %q, want %q", enc, EncodingEncrypted)
	}

	// The codec server, as the Web UI calls it.
	codec, err := CodecFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ui = "http://ui.example:8233"
	srv := httptest.NewServer(CodecHandler(codec, ui))
	defer srv.Close()
	body, err := protojson.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", cfg.TemporalNamespace)
	req.Header.Set("Origin", ui)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var decoded commonpb.Payloads
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != ui {
		t.Fatalf("decode: %s, CORS origin %q: %s", resp.Status, resp.Header.Get("Access-Control-Allow-Origin"), buf.Bytes())
	}
	if err := protojson.Unmarshal(buf.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	var back sagaLike
	if len(decoded.GetPayloads()) != 1 || !bytes.Contains(decoded.GetPayloads()[0].GetData(), []byte(in.UserID)) {
		t.Fatalf("decoded payloads %v do not show the user id %s", decoded.GetPayloads(), in.UserID)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(decoded.GetPayloads()[0], &back); err != nil || back != in {
		t.Fatalf("decoded input = %+v, %v, want %+v", back, err, in)
	}
}
