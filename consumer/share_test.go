package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// shareJob is the value of the share-group test records; Kind says what
// the handler does with it.
type shareJob struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"`
}

// Kinds of share-group test records.
const (
	kindOK     = "ok"     // processed at once
	kindFlaky  = "flaky"  // fails (transient) on deliveries 1 and 2, processed on the 3rd
	kindStuck  = "stuck"  // always fails (transient): dead-lettered on the last delivery
	kindPerm   = "perm"   // fails permanently: dead-lettered at once
	kindPanic  = "panic"  // the handler panics: dead-lettered at once
	kindPoison = "poison" // not JSON: dead-lettered at once, never handled
)

// shareKind is the kind of record i of the accounting test.
func shareKind(i int) string {
	switch {
	case i%30 == 7:
		return kindPoison
	case i%30 == 11:
		return kindPerm
	case i%30 == 13:
		return kindPanic
	case i%30 == 17:
		return kindStuck
	case i%10 == 3:
		return kindFlaky
	}
	return kindOK
}

// shareRecords are n test records, keyed by their id.
func shareRecords(topic string, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v, _ := json.Marshal(shareJob{ID: i, Kind: shareKind(i)})
		if shareKind(i) == kindPoison {
			v = []byte("\x00not json " + strconv.Itoa(i))
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: v}
	}
	return recs
}

// shareHandler is the handler of the accounting test.
func shareHandler(ctx context.Context, r *consumer.Record[string, shareJob]) error {
	switch r.Value.Kind {
	case kindFlaky:
		if r.Raw.DeliveryCount() < 3 {
			return failure.Transient(fmt.Errorf("job %d: not yet (delivery %d)", r.Value.ID, r.Raw.DeliveryCount()))
		}
	case kindStuck:
		return failure.Transient(fmt.Errorf("job %d: dependency down", r.Value.ID))
	case kindPerm:
		return failure.Permanent(fmt.Errorf("job %d: rejected", r.Value.ID))
	case kindPanic:
		panic("job " + strconv.Itoa(r.Value.ID))
	}
	return nil
}

// shareConfig is the consumer config of the share-group tests.
func shareConfig(c *kafkatest.Cluster, t testing.TB, topic, group string, h consumer.Handler[string, shareJob]) consumer.Config[string, shareJob] {
	return consumer.Config[string, shareJob]{
		Brokers: c.Brokers(), ClientOpts: c.ClientOpts(), Topics: []string{topic}, ShareGroup: group,
		Share:  consumer.Share{FromEarliest: true, MaxRecords: 20},
		Logger: kafkatest.Logger(t), Key: serde.String(), Value: serde.JSON[shareJob](),
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(5*time.Millisecond), 2)},
		}},
		Concurrency: consumer.Concurrency{Max: 4},
		Handler:     h,
	}
}

// The share-group member that TestIntegrationShareGroup kills: it runs this
// test binary (TestShareChild), acquires one poll, writes "holding" to its
// log file and blocks its handler until it is killed.
const (
	envShareChild   = "ANTIDOTE_SHARE_CHILD"
	envShareBrokers = "ANTIDOTE_SHARE_BROKERS"
	envShareTopic   = "ANTIDOTE_SHARE_TOPIC"
	envShareGroup   = "ANTIDOTE_SHARE_GROUP"
	envShareLog     = "ANTIDOTE_SHARE_LOG"
)

// TestShareChild is the member TestIntegrationShareGroup kills; it skips
// itself unless started by it.
func TestShareChild(t *testing.T) {
	if os.Getenv(envShareChild) != "1" {
		t.Skip("run by TestIntegrationShareGroup")
	}
	var once sync.Once
	c := kafkatest.New(t) // ANTIDOTE_KAFKA_BROKERS is set by the parent
	cfg := shareConfig(c, t, os.Getenv(envShareTopic), os.Getenv(envShareGroup), func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
		once.Do(func() {
			if err := os.WriteFile(os.Getenv(envShareLog), []byte("holding\n"), 0o644); err != nil {
				panic(err)
			}
		})
		<-ctx.Done() // hold the records until killed
		return ctx.Err()
	})
	// It holds poison pills too: they must reach the handler.
	cfg.Value = serde.Fallback(cfg.Value, func(context.Context, serde.Meta, []byte, error) (shareJob, error) { return shareJob{}, nil })
	cfg.Concurrency = consumer.Concurrency{}
	m, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationShareGroup: 300 records over 3 partitions of a share group.
// A member (a child process) acquires a poll and is killed with SIGKILL
// before it acknowledges anything; then three members share the rest. Good
// records are processed; flaky ones fail on their first two deliveries (the
// local retries spent, they are released) and are processed on the third;
// records that always fail transiently are dead-lettered on the group's last
// delivery, with the delivery count in the letter; poison pills, permanent
// failures and panics are dead-lettered at once. Nothing is lost, each
// failed record is dead-lettered exactly once, no good record is, and the
// records are spread over the members.
func TestIntegrationShareGroup(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share", 3)
	group := kafkatest.UniqueName("share-group")
	const n = 300
	kafkatest.Produce(t, manualProducer(t, c), shareRecords(topic, n)...)

	// The member that dies holding records it never acknowledged.
	logFile := t.TempDir() + "/child.log"
	cmd := exec.Command(os.Args[0], "-test.run=^TestShareChild$", "-test.timeout=2m", "-test.v")
	cmd.Env = append(os.Environ(), envShareChild+"=1", kafkatest.EnvBrokers+"="+strings.Join(c.Brokers(), ","),
		envShareTopic+"="+topic, envShareGroup+"="+group, envShareLog+"="+logFile)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	kafkatest.WaitFor(t, 45*time.Second, "the child member to hold records", func() bool {
		_, err := os.Stat(logFile)
		return err == nil
	})
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no acknowledgement, no goodbye
		t.Fatal(err)
	}
	_ = cmd.Wait()

	var mu sync.Mutex
	processed := map[int]int{}    // id -> successful handler calls
	byMember := map[int]int{}     // member -> successful handler calls
	deliveries := map[int]int32{} // id -> delivery count of its success
	members := make([]*consumer.Consumer[string, shareJob], 3)
	for i := range members {
		m, err := consumer.New(shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
			if err := shareHandler(ctx, r); err != nil {
				return err
			}
			mu.Lock()
			processed[r.Value.ID]++
			byMember[i]++
			deliveries[r.Value.ID] = r.Raw.DeliveryCount()
			mu.Unlock()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		members[i] = m
		runConsumer(t, m)
	}

	wantProcessed, wantDead := 0, 0
	for i := range n {
		switch shareKind(i) {
		case kindOK, kindFlaky:
			wantProcessed++
		default:
			wantDead++
		}
	}
	settled := func() (int, uint64) {
		mu.Lock()
		p := len(processed)
		mu.Unlock()
		var d uint64
		for _, m := range members {
			d += m.Stats().DeadLettered
		}
		return p, d
	}
	kafkatest.WaitFor(t, 50*time.Second, "every record processed or dead-lettered", func() bool {
		p, d := settled()
		return p == wantProcessed && d >= uint64(wantDead)
	})
	for _, m := range members {
		m.Close()
	}

	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		k := shareKind(i)
		switch {
		case (k == kindOK || k == kindFlaky) && processed[i] == 0:
			t.Errorf("record %d (%s) was never processed", i, k)
		case k == kindFlaky && deliveries[i] < 3:
			t.Errorf("flaky record %d processed on delivery %d, want 3 or later", i, deliveries[i])
		case k != kindOK && k != kindFlaky && processed[i] > 0:
			t.Errorf("record %d (%s) was processed", i, k)
		}
	}
	held := 0 // good records the killed member had acquired: delivered again
	for i := range n {
		if shareKind(i) == kindOK && deliveries[i] >= 2 {
			held++
		}
	}
	if held == 0 {
		t.Errorf("no good record was delivered twice: the killed member held none")
	}
	busy := 0
	for _, calls := range byMember {
		if calls > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("records went to %d member(s), want them spread over 2 or more: %v", busy, byMember)
	}

	// The dead-letter topic: each failed record exactly once, byte for
	// byte, with its delivery count; no good record.
	letters := map[int]int{}
	for _, l := range readAll(t, c, topic+".dlq") {
		id, err := strconv.Atoi(string(l.Key))
		if err != nil {
			t.Fatalf("letter with key %q", l.Key)
		}
		letters[id]++
		f := parse(t, l)
		if f.Group != group {
			t.Errorf("letter of %d: group %q, want %q", id, f.Group, group)
		}
		var count string
		for _, h := range l.Headers {
			if h.Key == consumer.HeaderDeliveryCount {
				count = string(h.Value)
			}
		}
		want := shareRecords(topic, n)[id]
		if string(l.Value) != string(want.Value) {
			t.Errorf("letter of %d: value %q, want %q", id, l.Value, want.Value)
		}
		switch shareKind(id) {
		case kindStuck:
			if count != "5" || f.Reason != deadletter.ReasonExhausted {
				t.Errorf("letter of stuck record %d: delivery count %q, reason %s; want 5 (the group's limit), %s", id, count, f.Reason, deadletter.ReasonExhausted)
			}
		case kindPoison, kindPerm, kindPanic:
			if count != "1" && count != "2" { // 2: the killed member held it first
				t.Errorf("letter of record %d (%s): delivery count %q, want 1 or 2", id, shareKind(id), count)
			}
			if f.Reason != deadletter.ReasonPermanent {
				t.Errorf("letter of record %d (%s): reason %s, want %s", id, shareKind(id), f.Reason, deadletter.ReasonPermanent)
			}
		}
	}
	for i := range n {
		k := shareKind(i)
		dead := k != kindOK && k != kindFlaky
		switch {
		case dead && letters[i] != 1:
			t.Errorf("record %d (%s) dead-lettered %d times, want once", i, k, letters[i])
		case !dead && letters[i] != 0:
			t.Errorf("record %d (%s) dead-lettered", i, k)
		}
	}
	t.Logf("%s: %d processed (%d good ones again after the kill), %d dead-lettered, by member %v", c.Kind(), len(processed), held, len(letters), byMember)
}

// setGroupConfig sets a config of a share group.
func setGroupConfig(t testing.TB, c *kafkatest.Cluster, group, key, value string) {
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
		t.Fatalf("set %s of %s: %v", key, group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("set %s of %s: %v", key, group, err)
		}
	}
}

// TestIntegrationShareRenew: a record retried in place for three times the
// group's acquisition lock stays with its member, its lock renewed: it is
// delivered once and processed once, never released to the other member;
// and the delivery limit is the group's.
func TestIntegrationShareRenew(t *testing.T) {
	c := kafkatest.New(t, kfake.BrokerConfigs(map[string]string{"group.share.record.lock.duration.ms": "2000", "share.record.lock.sweep.interval.ms": "200"}))
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-renew", 1)
	group := kafkatest.UniqueName("share-renew-group")
	if c.Real() {
		setGroupConfig(t, c, group, "share.record.lock.duration.ms", "2000")
	}
	kafkatest.Produce(t, manualProducer(t, c), &kgo.Record{Topic: topic, Key: []byte("0"), Value: []byte(`{"id":0,"kind":"slow"}`)})

	var mu sync.Mutex
	var tries []string // member/delivery of each try
	start := time.Now()
	newMember := func(name string) *consumer.Consumer[string, shareJob] {
		cfg := shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
			mu.Lock()
			tries = append(tries, fmt.Sprintf("%s/%d", name, r.Raw.DeliveryCount()))
			mu.Unlock()
			if time.Since(start) < 6*time.Second { // three locks
				return failure.Transient(errors.New("not yet"))
			}
			return nil
		})
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.Fixed(300 * time.Millisecond)} // retry here, forever
		m, err := consumer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		runConsumer(t, m)
		return m
	}
	a, b := newMember("a"), newMember("b")
	kafkatest.WaitFor(t, 40*time.Second, "the record processed", func() bool {
		return a.Stats().Processed+b.Stats().Processed > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(tries) < 10 {
		t.Fatalf("%d tries, want one every 300ms for 6s: %v", len(tries), tries)
	}
	for _, try := range tries {
		if try != tries[0] || !strings.HasSuffix(try, "/1") {
			t.Fatalf("tries %v: want every try by one member, on delivery 1 (the lock renewed)", tries)
		}
	}
	if s := a.Stats().Processed + b.Stats().Processed; s != 1 {
		t.Errorf("processed %d times, want once", s)
	}
	if n := a.Stats().ShareGroup.Renewed + b.Stats().ShareGroup.Renewed; n < 2 {
		t.Errorf("Stats.ShareGroup.Renewed %d, want the lock renewed at least twice in three lock durations", n)
	}
}

// TestShareConfig: what cannot apply to a share group fails in New, naming
// the key.
func TestShareConfig(t *testing.T) {
	base := func() consumer.Config[string, string] {
		return consumer.Config[string, string]{
			Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, ShareGroup: "g",
			Value:   serde.String(),
			Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
		}
	}
	for _, tc := range []struct {
		key string
		mod func(*consumer.Config[string, string])
	}{
		{"Group", func(c *consumer.Config[string, string]) { c.Group = "g2" }},
		{"RetryTopics", func(c *consumer.Config[string, string]) {
			c.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{time.Second}}
			c.Policy.Process.Transient.Then = consumer.ActionRetryTopic
		}},
		{"Policy", func(c *consumer.Config[string, string]) { c.Policy.Process.Transient.Then = consumer.ActionRetryTopic }},
		{"ExactlyOnce", func(c *consumer.Config[string, string]) { c.ExactlyOnce.TransactionalID = "x" }},
		{"BatchHandler", func(c *consumer.Config[string, string]) {
			c.Handler = nil
			c.BatchHandler = func(context.Context, []*consumer.Record[string, string]) error { return nil }
		}},
		{"DurableAttempts.Topic", func(c *consumer.Config[string, string]) { c.DurableAttempts.Topic = "{group}.attempts" }},
		{"GroupProtocol", func(c *consumer.Config[string, string]) { c.GroupProtocol = consumer.GroupConsumer }},
		{"Share.DeliveryLimit", func(c *consumer.Config[string, string]) { c.Share.DeliveryLimit = 1 }},
		{"Share.MaxRecords", func(c *consumer.Config[string, string]) { c.Share.MaxRecords = -1 }},
		{"Topics", func(c *consumer.Config[string, string]) { c.Topics = nil }},
	} {
		cfg := base()
		tc.mod(&cfg)
		_, err := consumer.New(cfg)
		if !errors.Is(err, consumer.ErrConfig) || !strings.Contains(err.Error(), ": "+tc.key+": ") {
			t.Errorf("%s: New returned %v, want a config error naming %s", tc.key, err, tc.key)
		}
	}
	m, err := consumer.New(base())
	if err != nil {
		t.Fatalf("a valid share config: %v", err)
	}
	m.Close()
}

// TestIntegrationShareDeliveryLimit: the delivery limit is the group's (3
// here, set on the group on Kafka, on the broker on kfake): a record that
// always fails is dead-lettered on its third delivery, not released to the
// broker, which would archive it.
func TestIntegrationShareDeliveryLimit(t *testing.T) {
	c := kafkatest.New(t, kfake.BrokerConfigs(map[string]string{"group.share.delivery.count.limit": "3"}))
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-limit", 1)
	group := kafkatest.UniqueName("share-limit-group")
	if c.Real() {
		setGroupConfig(t, c, group, "share.delivery.count.limit", "3")
	}
	stuck := shareRecords(topic, 18)[17]
	stuck.Partition = 0
	kafkatest.Produce(t, manualProducer(t, c), stuck)

	m, err := consumer.New(shareConfig(c, t, topic, group, shareHandler))
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, m)
	kafkatest.WaitFor(t, 30*time.Second, "the record dead-lettered", func() bool { return m.Stats().DeadLettered == 1 })
	s := m.Stats()
	var released uint64
	for k, v := range s.Outcomes {
		if k.Outcome == consumer.OutcomeReleased {
			released += v
		}
	}
	if released != 2 {
		t.Errorf("released %d times, want 2 (deliveries 1 and 2)", released)
	}
	if g := s.ShareGroup; g == nil || g.DeliveryLimit != 3 || len(g.Problems) != 0 {
		t.Errorf("Stats.ShareGroup = %+v, want the limit 3 and no problems", g)
	}
	letters := readAll(t, c, topic+".dlq")
	if len(letters) != 1 {
		t.Fatalf("%d letters, want 1", len(letters))
	}
	for _, h := range letters[0].Headers {
		if h.Key == consumer.HeaderDeliveryCount && string(h.Value) != "3" {
			t.Errorf("letter written on delivery %s, want 3", h.Value)
		}
	}
}

// TestIntegrationShareStop: a member that stops while it holds records
// (its handler waiting) acknowledges none of them: they are released, and
// the next member processes every one, on a later delivery.
func TestIntegrationShareStop(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-stop", 1)
	group := kafkatest.UniqueName("share-stop-group")
	recs := shareRecords(topic, 10)
	for i, r := range recs {
		r.Partition = 0
		r.Value, _ = json.Marshal(shareJob{ID: i, Kind: kindOK})
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)

	held := make(chan struct{}, 1)
	a, err := consumer.New(shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
		select {
		case held <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	stopA := runConsumer(t, a)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the first member got no record")
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Processed+s.DeadLettered+s.Skipped != 0 {
		t.Fatalf("the stopped member settled records: %+v", s)
	}

	var mu sync.Mutex
	got := map[int]int32{}
	b, err := consumer.New(shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
		mu.Lock()
		got[r.Value.ID] = r.Raw.DeliveryCount()
		mu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, b)
	kafkatest.WaitFor(t, 30*time.Second, "every record processed by the next member", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(recs)
	})
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, d := range got {
		if d >= 2 {
			again++
		}
	}
	if again == 0 {
		t.Errorf("no record was delivered a second time: the first member held none (%v)", got)
	}
}

// TestIntegrationShareBrokerDLQ: a share group whose broker dead-letter
// topic (Kafka 4.4) would lose records, or whose renewals are off, is
// reported in Stats with what to change; one set up right is not.
func TestIntegrationShareBrokerDLQ(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	if !c.Real() {
		t.Skip("kfake has no broker dead-letter topics")
	}
	topic := c.Topic(t, "share-guard", 1)
	problems := func(group string) []string {
		m, err := consumer.New(shareConfig(c, t, topic, group, shareHandler))
		if err != nil {
			t.Fatal(err)
		}
		stop := runConsumer(t, m)
		defer stop()
		kafkatest.WaitFor(t, 30*time.Second, "the member running", func() bool { return m.Stats().Ready })
		return m.Stats().ShareGroup.Problems
	}

	bad := kafkatest.UniqueName("share-guard-bad")
	setGroupConfig(t, c, bad, "errors.deadletterqueue.topic.name", bad+"-dlq")
	setGroupConfig(t, c, bad, "share.renew.acknowledge.enable", "false")
	got := strings.Join(problems(bad), "\n")
	for _, want := range []string{"lacks the brokers' prefix \"dlq.\"", "does not exist", "hold no key or value", "share.renew.acknowledge.enable is false"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not say %q:\n%s", want, got)
		}
	}

	good := kafkatest.UniqueName("share-guard-good")
	dlq := "dlq." + good
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"errors.deadletterqueue.group.enable": kmsg.StringPtr("true")}, dlq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), dlq) })
	setGroupConfig(t, c, good, "errors.deadletterqueue.topic.name", dlq)
	setGroupConfig(t, c, good, "errors.deadletterqueue.copy.record.enable", "true")
	if p := problems(good); len(p) != 0 {
		t.Errorf("a group set up right has problems: %q", p)
	}
}

// TestIntegrationShareHalt: a member that halts on a record returns a
// *HaltError naming it and leaves it unacknowledged: the next member gets
// it on a later delivery and dead-letters it.
func TestIntegrationShareHalt(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-halt", 1)
	group := kafkatest.UniqueName("share-halt-group")
	perm := shareRecords(topic, 12)[11]
	perm.Partition = 0
	kafkatest.Produce(t, manualProducer(t, c), perm)

	cfg := shareConfig(c, t, topic, group, shareHandler)
	cfg.Policy.Process.Permanent = consumer.Rule{Then: consumer.ActionHalt}
	a, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = a.Run(ctx)
	var halt *consumer.HaltError
	if !errors.As(err, &halt) || halt.Topic != topic || halt.Offset != 0 {
		t.Fatalf("Run returned %v, want a *HaltError on %s@0", err, topic)
	}

	b, err := consumer.New(shareConfig(c, t, topic, group, shareHandler))
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, b)
	kafkatest.WaitFor(t, 30*time.Second, "the record dead-lettered by the next member", func() bool { return b.Stats().DeadLettered == 1 })
	letters := readAll(t, c, topic+".dlq")
	if len(letters) != 1 {
		t.Fatalf("%d letters, want 1", len(letters))
	}
	for _, h := range letters[0].Headers {
		if h.Key == consumer.HeaderDeliveryCount && string(h.Value) != "2" {
			t.Errorf("dead-lettered on delivery %s, want 2 (the halted member had the first)", h.Value)
		}
	}
}

// TestIntegrationShareUnwritable: a dead letter that can never be written
// (larger than its topic accepts) follows DeadLetterConfig.Unwritable: with
// UnwritableSkip the record is skipped and acknowledged, not released.
func TestIntegrationShareUnwritable(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-unwritable", 1)
	group := kafkatest.UniqueName("share-unwritable-group")
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": kmsg.StringPtr("2000")}, topic+".dlq"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic+".dlq") })
	big := &kgo.Record{Topic: topic, Key: []byte("0"), Value: append([]byte("\x00"), make([]byte, 8000)...)} // not JSON
	kafkatest.Produce(t, manualProducer(t, c), big)

	cfg := shareConfig(c, t, topic, group, shareHandler)
	cfg.DeadLetter.Unwritable = consumer.UnwritableSkip
	m, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, m)
	kafkatest.WaitFor(t, 30*time.Second, "the record skipped", func() bool { return m.Stats().Skipped == 1 })
	s := m.Stats()
	if s.DeadLettered != 0 || s.Consumed != 1 {
		t.Errorf("consumed %d, dead-lettered %d; want 1 and 0", s.Consumed, s.DeadLettered)
	}
	for k, v := range s.Outcomes {
		if k.Outcome == consumer.OutcomeReleased {
			t.Errorf("released %d times, want never", v)
		}
	}
}

// TestIntegrationShareMembersBeyondPartitions: three members of a share
// group all take records of one partition, which a consumer group would
// give to one member alone.
func TestIntegrationShareMembersBeyondPartitions(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-wide", 1)
	group := kafkatest.UniqueName("share-wide-group")
	recs := shareRecords(topic, 90)
	for i, r := range recs {
		r.Partition = 0
		r.Value, _ = json.Marshal(shareJob{ID: i, Kind: kindOK})
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)

	var mu sync.Mutex
	byMember := map[int]int{}
	done := 0
	for i := range 3 {
		cfg := shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
			time.Sleep(20 * time.Millisecond) // the work of an I/O-bound handler
			mu.Lock()
			byMember[i]++
			done++
			mu.Unlock()
			return nil
		})
		cfg.Share.MaxRecords = 5
		cfg.Concurrency = consumer.Concurrency{}
		m, err := consumer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		runConsumer(t, m)
	}
	kafkatest.WaitFor(t, 45*time.Second, "every record processed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done >= len(recs)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(byMember) < 2 {
		t.Errorf("one partition went to %d member(s), want 2 or more: %v", len(byMember), byMember)
	}
	t.Logf("%s: records of one partition by member %v", c.Kind(), byMember)
}
