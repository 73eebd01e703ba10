package run

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
)

// startGRPCService starts the Python gRPC service (grpcio, from the
// published proto) and returns its target and the URL of its stats.
func startGRPCService(t *testing.T) (target, stats string) {
	t.Helper()
	l := startPython(t, srtest.Python(t), "testdata/run/grpc_service.py")
	g, h, ok := strings.Cut(l, " ")
	if !ok {
		t.Fatalf("the Python gRPC service printed %q, want two ports", l)
	}
	return "127.0.0.1:" + g, "http://127.0.0.1:" + h
}

type grpcStats struct {
	serviceStats
	Unauthenticated int `json:"unauthenticated"`
}

// TestIntegrationRunGRPCPython: antidote run calls a Python grpcio service
// that implements the published antidote.sink.v1.Sink, in two pipelines:
// one record a call (Handle) and batches (HandleBatch). Every status of the
// contract is met: OK and ALREADY_EXISTS processed, UNAVAILABLE retried, a
// RetryInfo delay honoured, INVALID_ARGUMENT dead-lettered with the
// service's words, a batch refused whole resolved record by record; poison
// pills never reach the service; hostile keys and headers arrive byte for
// byte; the metadata carries the token. Every record is accepted or
// dead-lettered once, and the offsets are committed to the end.
func TestIntegrationRunGRPCPython(t *testing.T) {
	target, statsURL := startGRPCService(t)
	c := kafkatest.New(t)
	cl := c.Client(t)
	kinds := []string{"ok", "duplicate", "transient", "ok", "permanent", "ok", "retry-after", "poison", "ok", "ok"}
	type pipe struct {
		name, topic, group, extra string
		first, n                  int
	}
	pipes := []pipe{
		{name: "unary", first: 0, n: 50},
		{name: "batch", first: 1000, n: 80, extra: "        batch: {size: 10, linger: 50ms}\n"},
	}
	kindOf := map[string]string{} // id -> kind
	var yaml strings.Builder
	for i := range pipes {
		p := &pipes[i]
		p.topic = c.Topic(t, "run-grpc-"+p.name, 3)
		p.group = kafkatest.UniqueName("run-grpc-" + p.name)
		var recs []*kgo.Record
		for i := p.first; i < p.first+p.n; i++ {
			kind := kinds[i%len(kinds)]
			if p.name == "batch" && (i == 1023 || i == 1061) {
				kind = "batch-breaker"
			}
			kindOf[fmt.Sprint(i)] = kind
			key := []byte(fmt.Sprintf("key-%d\r\n\x00\xff\"", i))
			hv := []byte(fmt.Sprintf("t=%d, \x00é\r\n", i))
			value, _ := json.Marshal(map[string]any{"id": i, "kind": kind, "key_hex": hex.EncodeToString(key), "header_hex": hex.EncodeToString(hv)})
			if kind == "poison" {
				value = append([]byte("\x00not json "), value...)
			}
			recs = append(recs, &kgo.Record{Topic: p.topic, Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: "trace", Value: hv}}})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&yaml, `  - name: %s
    topics: [%s]
    group: %s
    value: {format: json}
    commit-interval: 500ms
    sink:
      grpc:
        target: %s
        timeout: 10s
        metadata: {authorization: "Bearer ${file:token}"}
%s    policy:
      process:
        transient:
          retry: {initial: 50ms, max: 200ms, attempts: 0}
`, p.name, p.topic, p.group, target, p.extra)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "run.yaml")
	cfg := fmt.Sprintf("kafka:\n  brokers: [%s]\npipelines:\n%s", strings.Join(c.Brokers(), ", "), yaml.String())
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantAccepted, wantDead := 0, 0
	for _, k := range kindOf {
		switch k {
		case "ok", "duplicate", "transient", "retry-after":
			wantAccepted++
		default:
			wantDead++
		}
	}
	var s grpcStats
	get := func() {
		resp, err := http.Get(statsURL)
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		defer resp.Body.Close()
		s = grpcStats{}
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatalf("stats: %v", err)
		}
	}
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 120*time.Second, "every record accepted or dead-lettered", func() bool {
		get()
		dead := int64(0)
		for _, p := range pipes {
			dead += countTopic(t, adm, p.topic+".dlq")
		}
		return len(s.Accepted) >= wantAccepted && dead >= int64(wantDead)
	}, logs.String)
	for _, p := range pipes {
		waitCommittedAtEnd(t, c, p.group, logs.String, p.topic)
	}
	if code, out := stop(); code != 0 {
		t.Fatalf("exit %d after the drain\n%s", code, out)
	}
	get()
	if len(s.Mismatch) > 0 || s.Unauthenticated > 0 {
		t.Fatalf("the service saw %d calls without the token, and keys or headers that do not decode to the record's bytes: ids %v", s.Unauthenticated, s.Mismatch)
	}
	most := 0
	for _, b := range s.Batches {
		most = max(most, b)
	}
	if most < 2 || most > 10 {
		t.Errorf("HandleBatch calls of at most %d records (%d calls): want 2 to 10", most, len(s.Batches))
	}
	for id, k := range kindOf {
		tries := s.Tries[id]
		switch k {
		case "ok", "duplicate", "transient", "retry-after":
			if s.Accepted[id] < 1 {
				t.Errorf("record %s (%s) was not accepted: tries %v", id, k, tries)
			}
		default:
			if s.Accepted[id] > 0 {
				t.Errorf("record %s (%s) accepted", id, k)
			}
		}
		switch k {
		case "transient":
			if !consecutive(tries, 3) {
				t.Errorf("transient record %s: attempts %v, want 3 consecutive from 1 or 2", id, tries)
			}
		case "retry-after":
			if !consecutive(tries, 2) {
				t.Errorf("retry-after record %s: attempts %v, want 2 consecutive from 1 or 2", id, tries)
			}
		case "poison":
			if len(tries) > 0 {
				t.Errorf("poison pill %s reached the service", id)
			}
		}
	}
	dead := 0
	for _, p := range pipes {
		seen := map[string]bool{}
		for _, r := range readAll(t, c, p.topic+".dlq") {
			l, err := deadletter.ParseRecord(r)
			if err != nil {
				t.Fatalf("letter %d/%d: %v", r.Partition, r.Offset, err)
			}
			// The key is "key-<id>\r\n...".
			id, _, _ := strings.Cut(strings.TrimPrefix(string(l.Record.Key), "key-"), "\r")
			k := kindOf[id]
			if seen[id] {
				t.Errorf("%s: record %s dead-lettered twice", p.name, id)
			}
			seen[id] = true
			switch {
			case k == "poison" && l.Stage == "deserialize-value":
			case (k == "permanent" || k == "batch-breaker") && l.Stage == "process" && strings.Contains(l.Message, "InvalidArgument: amount must be positive"):
			default:
				t.Errorf("%s: record %s (%s) dead-lettered at %s: %s", p.name, id, k, l.Stage, l.Message)
			}
		}
		dead += len(seen)
	}
	if dead != wantDead {
		t.Errorf("%d records dead-lettered, want %d", dead, wantDead)
	}
	t.Logf("%d records = accepted %d + dead-lettered %d; %d HandleBatch calls of at most %d records (%s)",
		len(kindOf), len(s.Accepted), dead, len(s.Batches), most, c.Kind())
}
