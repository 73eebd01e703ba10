package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

const testToken = "t0ken-for-tests"

// serve serves h on a free loopback port until t ends and returns its base
// URL.
func serve(t *testing.T, h *admin.Handler) string {
	t.Helper()
	ln, err := h.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s")
		}
	})
	return "http://" + ln.Addr().String()
}

// call makes one request and returns the status and the decoded JSON body
// (failing t when the body is not JSON).
func call(t *testing.T, method, url, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q; want application/json (body %q)", method, url, ct, b)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, url, b, err)
	}
	return resp.StatusCode, body
}

// stuckConsumer runs a consumer on a one-partition topic whose record at
// offset 0 fails transiently for ever; it returns the consumer, the topic
// and a producer.
func stuckConsumer(t *testing.T) (*consumer.Consumer[string, string], string, *kgo.Client, *processed) {
	t.Helper()
	c := kafkatest.New(t)
	topic := c.Topic(t, "admin", 1)
	pcl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	kafkatest.Produce(t, pcl,
		&kgo.Record{Topic: topic, Value: []byte("poison")},
		&kgo.Record{Topic: topic, Value: []byte("ok-1")},
		&kgo.Record{Topic: topic, Value: []byte("ok-2")},
	)
	seen := &processed{}
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"),
		Value: serde.String(),
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value == "poison" {
				return failure.Transient(errors.New("inventory database down"))
			}
			seen.add(r.Value)
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.Fixed(50 * time.Millisecond)},
		}},
		Logger: kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- cons.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	})
	return cons, topic, pcl, seen
}

type processed struct {
	mu     sync.Mutex
	values []string
}

func (p *processed) add(v string) {
	p.mu.Lock()
	p.values = append(p.values, v)
	p.mu.Unlock()
}

func (p *processed) has(v string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.values {
		if s == v {
			return true
		}
	}
	return false
}

// TestIntegrationAdminAPI drives a stuck consumer over real HTTP: the
// refusals each get their documented status and leave the record where it
// is; the right token and offset skip it; the kill switch flips; an operator
// pauses and resumes the partition.
func TestIntegrationAdminAPI(t *testing.T) {
	cons, topic, pcl, seen := stuckConsumer(t)
	h, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"orders": cons}, Token: testToken, Logger: kafkatest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, h)

	if code, body := call(t, "GET", base+"/healthz", ""); code != 200 || body["status"] != "ok" {
		t.Fatalf("/healthz = %d %v", code, body)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the partition stuck on offset 0", func() bool {
		st := cons.Stats().Stuck
		return len(st) == 1 && st[0].Offset == 0
	})
	kafkatest.WaitFor(t, 30*time.Second, "ready", func() bool { code, _ := call(t, "GET", base+"/readyz", ""); return code == 200 })

	// /stats carries the stuck partition (and needs the token).
	if code, _ := call(t, "GET", base+"/stats", ""); code != 401 {
		t.Fatalf("/stats without a token = %d; want 401", code)
	}
	code, body := call(t, "GET", base+"/stats", testToken)
	if code != 200 {
		t.Fatalf("/stats = %d %v", code, body)
	}
	stuck := body["consumers"].(map[string]any)["orders"].(map[string]any)["Stuck"].([]any)
	if len(stuck) != 1 || stuck[0].(map[string]any)["Offset"].(float64) != 0 || stuck[0].(map[string]any)["Topic"] != topic {
		t.Fatalf("/stats Stuck = %v; want %s/0 stuck on offset 0", stuck, topic)
	}

	skip := func(part, offset string) string {
		return fmt.Sprintf("%s/partitions/%s/%s/skip?offset=%s", base, topic, part, offset)
	}
	refusals := []struct {
		name, method, url, token string
		status                   int
		errHas                   string
	}{
		{"no token", "POST", skip("0", "0"), "", 401, "missing bearer token"},
		{"wrong token", "POST", skip("0", "0"), "not-" + testToken, 401, "wrong bearer token"},
		{"wrong offset", "POST", skip("0", "1"), testToken, 409, "stuck on offset 0, not 1"},
		{"missing partition", "POST", skip("7", "0"), testToken, 404, "not assigned"},
		{"missing topic", "POST", base + "/partitions/no-such-topic/0/skip?offset=0", testToken, 404, "not assigned"},
		{"malformed partition", "POST", skip("zero", "0"), testToken, 400, "malformed partition"},
		{"negative partition", "POST", skip("-1", "0"), testToken, 400, "malformed partition"},
		{"malformed offset", "POST", skip("0", "0x0"), testToken, 400, "malformed offset"},
		{"missing offset", "POST", base + "/partitions/" + topic + "/0/skip", testToken, 400, "missing query parameter offset"},
		{"malformed path", "POST", base + "/partitions/" + topic + "/skip?offset=0", testToken, 400, "malformed path"},
		{"malformed topic", "POST", base + "/partitions/bad%20topic/0/skip?offset=0", testToken, 400, "malformed topic"},
		{"unknown action", "POST", base + "/partitions/" + topic + "/0/rewind", testToken, 400, "malformed path"},
		{"wrong method", "GET", skip("0", "0"), testToken, 405, "not allowed"},
		{"named consumer unknown", "POST", skip("0", "0") + "&consumer=payments", testToken, 404, `no consumer named "payments"`},
	}
	for _, tc := range refusals {
		code, body := call(t, tc.method, tc.url, tc.token)
		if msg, _ := body["error"].(string); code != tc.status || !strings.Contains(msg, tc.errHas) {
			t.Errorf("%s: %s %s = %d %v; want %d with an error containing %q", tc.name, tc.method, tc.url, code, body, tc.status, tc.errHas)
		}
	}
	if s := cons.Stats(); s.Skipped != 0 || len(s.Stuck) != 1 || seen.has("ok-1") {
		t.Fatalf("after the refusals: Skipped %d, Stuck %v, ok-1 processed %v; want the record still stuck", s.Skipped, s.Stuck, seen.has("ok-1"))
	}

	// The right token and offset skip it.
	code, body = call(t, "POST", skip("0", "0"), testToken)
	if code != 200 || body["action"] != "skipped" || body["offset"].(float64) != 0 || body["consumer"] != "orders" {
		t.Fatalf("skip = %d %v; want 200 skipped at offset 0", code, body)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the records after the skipped one", func() bool { return seen.has("ok-2") })
	if s := cons.Stats(); s.Skipped != 1 || len(s.Stuck) != 0 {
		t.Fatalf("after the skip: Skipped %d, Stuck %v; want 1 and none", s.Skipped, s.Stuck)
	}
	if code, body := call(t, "POST", skip("0", "0"), testToken); code != 409 {
		t.Fatalf("skip of a flowing partition = %d %v; want 409", code, body)
	}

	// The kill switch.
	for _, tc := range []struct {
		query string
		want  bool
	}{{"enabled=off", false}, {"enabled=on", true}, {"enabled=false", false}} {
		code, body := call(t, "POST", base+"/retry?"+tc.query, testToken)
		if code != 200 || body["retry_enabled"] != tc.want {
			t.Fatalf("POST /retry?%s = %d %v", tc.query, code, body)
		}
		if cons.RetryEnabled() != tc.want || cons.Stats().RetryEnabled != tc.want {
			t.Fatalf("after /retry?%s RetryEnabled = %v; want %v", tc.query, cons.RetryEnabled(), tc.want)
		}
		_, body = call(t, "GET", base+"/stats?consumer=orders", testToken)
		if got := body["consumers"].(map[string]any)["orders"].(map[string]any)["RetryEnabled"]; got != tc.want {
			t.Fatalf("/stats RetryEnabled = %v; want %v", got, tc.want)
		}
	}
	if code, body := call(t, "POST", base+"/retry?enabled=maybe", testToken); code != 400 || cons.RetryEnabled() {
		t.Fatalf("POST /retry?enabled=maybe = %d %v (retry enabled %v); want 400 and no change", code, body, cons.RetryEnabled())
	}
	if code, _ := call(t, "POST", base+"/retry?enabled=on", "wrong"); code != 401 || cons.RetryEnabled() {
		t.Fatalf("POST /retry with a wrong token = %d; want 401 and no change", code)
	}

	// Pause and resume.
	base0 := fmt.Sprintf("%s/partitions/%s/0", base, topic)
	if code, body := call(t, "POST", base0+"/pause", testToken); code != 200 || body["action"] != "paused" {
		t.Fatalf("pause = %d %v", code, body)
	}
	part := func() consumer.Partition {
		for _, p := range cons.Stats().Partitions {
			if p.Topic == topic && p.Partition == 0 {
				return p
			}
		}
		t.Fatal("partition 0 missing from Stats")
		return consumer.Partition{}
	}
	if p := part(); p.State != consumer.PartitionPaused || p.Paused != consumer.PauseOperator {
		t.Fatalf("after pause: %+v; want paused by an operator", p)
	}
	kafkatest.Produce(t, pcl, &kgo.Record{Topic: topic, Value: []byte("after-resume")})
	if code, body := call(t, "POST", base0+"/resume", testToken); code != 200 || body["action"] != "resumed" {
		t.Fatalf("resume = %d %v", code, body)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the record produced while paused", func() bool { return seen.has("after-resume") })
	if p := part(); p.State != consumer.PartitionFlowing {
		t.Fatalf("after resume: %+v; want flowing", p)
	}
	if code, _ := call(t, "POST", base+"/partitions/"+topic+"/3/pause", testToken); code != 404 {
		t.Fatalf("pause of a partition not assigned = %d; want 404", code)
	}
}

// TestIntegrationFloodResume: a consumer stopped by its flood guard is
// resumed over HTTP with the token; without it, or when nothing tripped, the
// request is refused.
func TestIntegrationFloodResume(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "adminflood", 1)
	var recs []*kgo.Record
	// The guard trips on the 5th pill; after the resume, a window of 20
	// records of grace takes the other 19.
	for i := 0; i < 24; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("\xffpoison")})
	}
	prod := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, prod, recs...)
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("adminflood"),
		Value:      serde.String(serde.ValidUTF8()),
		Handler:    func(context.Context, *consumer.Record[string, string]) error { return nil },
		FloodGuard: consumer.FloodGuard{Window: 20, Min: 5},
		Logger:     kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"c": cons}, Token: testToken, Logger: kafkatest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, h)
	if code, body := call(t, "POST", base+"/flood/resume", testToken); code != http.StatusConflict {
		t.Fatalf("resume before a flood: %d %v; want 409", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	defer func() { cancel(); <-done }()
	kafkatest.WaitFor(t, 30*time.Second, "the flood guard tripped", func() bool { return cons.Stats().Flood != nil })
	if code, body := call(t, "GET", base+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body), "flood guard") {
		t.Fatalf("readyz while the flood guard holds the consumer: %d %v; want 503 naming the flood guard", code, body)
	}
	if code, _ := call(t, "POST", base+"/flood/resume", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("resume with a wrong token: %d; want 401", code)
	}
	code, body := call(t, "POST", base+"/flood/resume", testToken)
	if code != http.StatusOK || body["resumed"] == nil {
		t.Fatalf("resume: %d %v; want 200 with the cleared flood", code, body)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the 24 pills dead-lettered after the resume", func() bool { return cons.Stats().DeadLettered == 24 })
	if cons.Stats().Flood != nil {
		t.Fatal("Stats().Flood still set after the resume")
	}
}
