package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationShareBrokerLetters (Kafka 4.4, KIP-1191): one topic holds
// what the broker dead-letters for a share group beside Antidote's own
// letters of the same group. A member that REJECTs a record, and a record
// released on its last delivery (the group's limit is 2), are written by
// the broker (__dlq.errors.* headers, key and value copied); a poison pill
// is dead-lettered by an Antidote member into the same topic. antidote dlq
// ls lists the three, each in its dialect, and redrive sends the three
// records back to the source topic, each once per letter. A letter may
// come twice (letters of a share group are at least once, the broker's
// too).
func TestIntegrationShareBrokerLetters(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	if !c.Real() {
		t.Skip("kfake has no broker dead-letter topics")
	}
	src := c.Topic(t, "share-src", 1)
	group := kafkatest.UniqueName("share-letters")
	dlq := "dlq." + group
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"errors.deadletterqueue.group.enable": kmsg.StringPtr("true")}, dlq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), dlq) })
	// The broker writes its letters itself, and one it cannot write is
	// archived without a letter ("Failed to write to DLQ, proceeding to
	// ARCHIVED regardless"): the topic must have its leader before the
	// first REJECT, which a busy broker takes a moment to elect.
	kafkatest.WaitFor(t, 60*time.Second, "the broker's dead-letter topic led", func() bool {
		td, err := adm.ListTopics(ctx, dlq)
		if err != nil || td[dlq].Err != nil || len(td[dlq].Partitions) != 1 {
			return false
		}
		p := td[dlq].Partitions[0]
		return p.Err == nil && p.Leader >= 0
	})
	for k, v := range map[string]string{
		"errors.deadletterqueue.topic.name":         dlq,
		"errors.deadletterqueue.copy.record.enable": "true",
		"share.delivery.count.limit":                "2",
		"share.auto.offset.reset":                   "earliest",
	} {
		setGroupConfig(t, c, group, k, v)
	}
	pcl := c.Client(t, kgo.ProducerLinger(0))
	values := []string{"rejected", "released-twice", "poison", `"ok"`}
	produce := func(vs ...string) {
		for _, v := range vs {
			kafkatest.Produce(t, pcl, &kgo.Record{Topic: src, Key: []byte(v), Value: []byte(v)})
		}
	}
	produce(values[:2]...)

	// A plain share consumer REJECTs the first record and RELEASEs the
	// second; another releases the second again: on its last delivery
	// (the limit is 2), it is archived, into the broker's topic. Every
	// record a poll brings is acknowledged: franz-go accepts the others.
	raw := func(n int, ack func(*kgo.Record) kgo.AckStatus) {
		t.Helper()
		// Fetching only while polling: a record fetched ahead, unseen,
		// would be released on its next delivery when the client closes.
		cl := c.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(src), kgo.MaxConcurrentFetches(0))
		defer cl.Close()
		for got := 0; got < n; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				r.Ack(ack(r))
				got++
			})
		}
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatalf("flushing acknowledgements: %v", err)
		}
	}
	raw(2, func(r *kgo.Record) kgo.AckStatus {
		if string(r.Value) == "rejected" {
			return kgo.AckReject
		}
		return kgo.AckRelease
	})
	raw(1, func(r *kgo.Record) kgo.AckStatus {
		if r.DeliveryCount() != 2 {
			t.Errorf("%q on delivery %d, want 2", r.Value, r.DeliveryCount())
		}
		return kgo.AckRelease
	})
	produce(values[2:]...)

	// An Antidote member of the same group, its letters in the broker's
	// topic: the poison pill (not JSON) is one.
	m, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), ClientOpts: c.ClientOpts(), Topics: []string{src}, ShareGroup: group,
		Value: serde.JSON[string](), Logger: kafkatest.Logger(t),
		DeadLetter: consumer.DeadLetterConfig{Topic: "dlq.{group}"},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value != "ok" {
				return failure.Permanent(errors.New("unexpected"))
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(mctx) }()
	kafkatest.WaitFor(t, 60*time.Second, "the poison pill dead-lettered and the good record processed", func() bool {
		s := m.Stats()
		return s.DeadLettered == 1 && s.Processed == 1
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := m.Stats().ShareGroup.Problems; len(p) != 0 {
		t.Errorf("a group set up right has problems: %q", p)
	}

	brokers := strings.Join(c.Brokers(), ",")
	var ls []dlqLetterJSON
	waited := time.Now()
	kafkatest.WaitFor(t, 60*time.Second, "three letters", func() bool {
		code, out, _ := runCmd(t, "dlq", "ls", "--topic", dlq, "-o", "json", "--brokers", brokers)
		ls, err = jsonLines[dlqLetterJSON](out)
		if code != 0 || err != nil {
			t.Logf("after %v: exit %d, %v", time.Since(waited).Round(time.Millisecond), code, err)
		}
		return code == 0 && err == nil && len(ls) >= 3
	})
	for _, l := range ls {
		t.Logf("letter %d: dialect %s, reason %s, original offset %v, group %s, message %q", l.Offset, l.Dialect, l.Reason, ptrVal(l.Original.Offset), l.Group, l.Message)
	}
	// Every record has its letters, of its dialect and reason, and no other
	// record has any. A letter may come twice: Antidote's in a share group
	// are at least once (an ACCEPT that does not reach the broker, and the
	// record comes again), and Kafka 4.4.0 was seen to write its letter of
	// a REJECTed record twice.
	byOffset := map[int64][]dlqLetterJSON{}
	for _, l := range ls {
		if l.Original.Topic == nil || *l.Original.Topic != src || l.Original.Offset == nil || l.Group != group {
			t.Errorf("letter %+v: want the source record and the group", l)
			continue
		}
		byOffset[*l.Original.Offset] = append(byOffset[*l.Original.Offset], l)
	}
	want := map[int64]struct{ dialect, reason string }{
		0: {"share-group", deadletter.ShareReasonRejected},
		1: {"share-group", deadletter.ShareReasonExceeded},
		2: {"antidote", string(deadletter.ReasonPermanent)},
	}
	for off, w := range want {
		got := byOffset[off]
		if len(got) == 0 {
			t.Errorf("no letter of offset %d, want one (%s, %s)", off, w.dialect, w.reason)
		}
		if len(got) > 1 {
			t.Logf("%d letters of offset %d (%s): a repeat", len(got), off, w.dialect)
		}
		for _, l := range got {
			if l.Dialect != w.dialect || l.Reason != w.reason {
				t.Errorf("letter of offset %d: dialect %q reason %q, want %q %q", off, l.Dialect, l.Reason, w.dialect, w.reason)
			}
		}
	}
	for off := range byOffset {
		if _, ok := want[off]; !ok {
			t.Errorf("a letter of offset %d, which no member should have dead-lettered", off)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	code, out, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "-o", "json", "--brokers", brokers)
	var r dlqRedriveJSON
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Redriven != len(ls) {
		t.Fatalf("redrive: exit %d\n%s%s", code, out, errOut)
	}
	back := map[string]int{}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := deadletter.Scan(sctx, pcl, deadletter.ScanConfig{Topic: src, IdleTimeout: 5 * time.Second}, func(r *kgo.Record) error {
		if r.Offset >= int64(len(values)) {
			back[string(r.Value)]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for off, v := range values[:3] {
		if n := len(byOffset[int64(off)]); back[v] != n {
			t.Errorf("%q redriven %d times, want once per letter, %d (redriven: %v)", v, back[v], n, back)
		}
	}
}

// setGroupConfig sets a config of a group.
func setGroupConfig(t *testing.T, c *kafkatest.Cluster, group, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("setting %s=%s on group %s: error code %d %s", key, value, group, r.ErrorCode, msg)
		}
	}
}

// ptrVal is *p, or -1 for nil.
func ptrVal(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
