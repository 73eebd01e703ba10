package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// shareRecorder counts the share-group events of the hooks.
type shareRecorder struct {
	consumer.NopHooks
	mu       sync.Mutex
	acquired map[int32]int // by delivery count
	acks     map[consumer.Ack]int
	settled  map[consumer.Outcome]int
}

func newShareRecorder() *shareRecorder {
	return &shareRecorder{acquired: map[int32]int{}, acks: map[consumer.Ack]int{}, settled: map[consumer.Outcome]int{}}
}

func (r *shareRecorder) RecordAcquired(e consumer.AcquiredEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired[e.DeliveryCount]++
}

func (r *shareRecorder) RecordAcknowledged(e consumer.AckEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks[e.Ack]++
}

func (r *shareRecorder) RecordSettled(e consumer.SettledEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled[e.Outcome]++
}

// TestShareStatsAndHooks: a share-group member counts what it acquired (by
// delivery count), and each acknowledgement it sent, in Stats.ShareGroup
// and in its hooks: 30 records, of which 3 fail on their first delivery
// (retried in place 12 times, released, then processed on their second
// delivery), 2 fail permanently (dead-lettered, then accepted) and one
// succeeds on its 12th try in place: 1.8s, while locks of 2s are renewed
// every third of their duration.
func TestShareStatsAndHooks(t *testing.T) {
	// Locks of 2s, renewed every third of it.
	c := kafkatest.New(t, kfake.BrokerConfigs(map[string]string{"group.share.record.lock.duration.ms": "2000", "share.record.lock.sweep.interval.ms": "200"}))
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-stats", 3)
	group := kafkatest.UniqueName("share-stats-group")
	if c.Real() {
		setGroupConfig(t, c, group, "share.record.lock.duration.ms", "2000")
	}
	const n = 30
	recs := make([]*kgo.Record, n)
	kind := func(i int) string {
		switch i {
		case 3, 13, 23:
			return "once"
		case 7, 17:
			return kindPerm
		case 29:
			return "slow"
		}
		return kindOK
	}
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte{byte('a' + i)}, Value: []byte(fmt.Sprintf(`{"id":%d,"kind":%q}`, i, kind(i)))}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)

	var mu sync.Mutex
	slowTries := 0
	rec := newShareRecorder()
	cfg := shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
		switch r.Value.Kind {
		case "once":
			if r.Raw.DeliveryCount() == 1 {
				return failure.Transient(errors.New("first delivery fails"))
			}
		case kindPerm:
			return failure.Permanent(errors.New("never"))
		case "slow":
			mu.Lock()
			defer mu.Unlock()
			if slowTries++; slowTries < 12 {
				return failure.Transient(errors.New("slow: succeeds on its 12th try"))
			}
		}
		return nil
	})
	cfg.Hooks = rec
	cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(150*time.Millisecond), 12)}
	m, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, m)
	defer func() {
		if t.Failed() {
			s := m.Stats()
			t.Logf("processed %d, dead-lettered %d, share group %+v", s.Processed, s.DeadLettered, *s.ShareGroup)
		}
	}()
	kafkatest.WaitFor(t, 40*time.Second, "every record settled", func() bool {
		s := m.Stats()
		return s.Processed == n-2 && s.DeadLettered == 2
	})
	s := m.Stats()
	sg := s.ShareGroup
	if sg == nil {
		t.Fatal("Stats.ShareGroup is nil")
	}
	if sg.Acquired != n+3 || sg.Redelivered != 3 {
		t.Errorf("acquired %d, redelivered %d; want %d, 3", sg.Acquired, sg.Redelivered, n+3)
	}
	if sg.Deliveries[1] != n || sg.Deliveries[2] != 3 {
		t.Errorf("deliveries %v, want 1: %d, 2: 3", sg.Deliveries, n)
	}
	if sg.Accepted != n || sg.Released != 3 {
		t.Errorf("accepted %d, released %d; want %d, 3", sg.Accepted, sg.Released, n)
	}
	if sg.Renewed == 0 {
		t.Errorf("no renewal: the slow record was retried in place for 1s with a renewal every 200ms")
	}
	if sg.Held != 0 {
		t.Errorf("held %d, want 0: every record settled", sg.Held)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.acquired[1] != n || rec.acquired[2] != 3 {
		t.Errorf("hooks: acquired %v, want 1: %d, 2: 3", rec.acquired, n)
	}
	if rec.acks[consumer.AckAccept] != n || rec.acks[consumer.AckRelease] != 3 || uint64(rec.acks[consumer.AckRenew]) != sg.Renewed {
		t.Errorf("hooks: acknowledgements %v; want accept %d, release 3, renew %d (Stats)", rec.acks, n, sg.Renewed)
	}
	if rec.settled[consumer.OutcomeReleased] != 3 || rec.settled[consumer.OutcomeDeadLettered] != 2 || rec.settled[consumer.OutcomeProcessed] != n-2 {
		t.Errorf("hooks: settled %v", rec.settled)
	}
}

// TestShareOperator: on a share-group member, the records retried in place
// show in Stats.Stuck; an operator skips one and dead-letters another (the
// letter names them), the kill switch sends the third to its dead letter
// at once (reason retry-disabled), and Pause, which has no partition to
// act on, refuses.
func TestShareOperator(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-operator", 3)
	group := kafkatest.UniqueName("share-operator-group")
	recs := make([]*kgo.Record, 3)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i), Key: []byte{byte('a' + i)}, Value: fmt.Appendf(nil, `{"id":%d,"kind":%q}`, i, kindStuck)}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	cfg := shareConfig(c, t, topic, group, func(context.Context, *consumer.Record[string, shareJob]) error {
		return failure.Transient(errors.New("the service is down"))
	})
	cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.Fixed(time.Hour)} // until an operator acts
	m, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, m)
	// The records come in one poll or in several (a broker may return
	// one partition's records a poll): the test acts on each as it comes.
	seen := map[int32]bool{}
	next := func(what string) consumer.Stuck {
		t.Helper()
		var got consumer.Stuck
		kafkatest.WaitFor(t, 30*time.Second, what, func() bool {
			for _, s := range m.Stats().Stuck {
				if !seen[s.Partition] {
					got = s
					return true
				}
			}
			return false
		})
		seen[got.Partition] = true
		if got.Reason != consumer.StuckRetrying || got.Attempts != 1 || got.LastError == "" {
			t.Errorf("stuck %+v: want retrying, attempt 1, with its error", got)
		}
		return got
	}
	first := next("a record retrying in place")
	if err := m.Pause(topic, first.Partition); !errors.Is(err, consumer.ErrNotAssigned) {
		t.Errorf("Pause: %v, want ErrNotAssigned", err)
	}
	if err := m.Skip(topic, first.Partition, first.Offset+1); !errors.Is(err, consumer.ErrNotStuck) {
		t.Errorf("Skip of another offset: %v, want ErrNotStuck", err)
	}
	if err := m.Skip(topic, first.Partition, first.Offset); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the skip", func() bool { return m.Stats().Skipped == 1 })
	second := next("a second record retrying in place")
	if err := m.DeadLetter(topic, second.Partition, second.Offset, "alice"); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the operator's dead letter", func() bool { return m.Stats().DeadLettered == 1 })
	third := next("a third record retrying in place")
	m.SetRetryEnabled(false)
	kafkatest.WaitFor(t, 30*time.Second, "the kill switch's dead letter", func() bool {
		return m.Stats().DeadLettered == 2
	})
	s := m.Stats()
	if len(s.Stuck) != 0 || s.ShareGroup.Accepted != 3 || s.ShareGroup.Released != 0 {
		t.Errorf("stuck %v, accepted %d, released %d; want none, 3, 0", s.Stuck, s.ShareGroup.Accepted, s.ShareGroup.Released)
	}
	reasons := map[int32]deadletter.Reason{}
	for _, l := range readAll(t, c, topic+".dlq") {
		f := parse(t, l)
		reasons[f.Partition] = f.Reason
		if f.Reason == deadletter.ReasonOperator && !strings.Contains(f.Message, "alice") {
			t.Errorf("operator's letter: message %q does not name alice", f.Message)
		}
	}
	if len(reasons) != 2 || reasons[second.Partition] != deadletter.ReasonOperator || reasons[third.Partition] != deadletter.ReasonRetryDisabled {
		t.Errorf("letters by source partition %v, want %d: operator, %d: retry-disabled", reasons, second.Partition, third.Partition)
	}
}

// TestShareLetterLinger: a share-group member's letters go out at once (a
// worker waits for its letter, so a linger would hold each for its whole
// length), unless the user's ClientOpts set a linger.
func TestShareLetterLinger(t *testing.T) {
	c := kafkatest.New(t)
	for _, tc := range []struct {
		opts []kgo.Opt
		want time.Duration
	}{{nil, 0}, {[]kgo.Opt{kgo.ProducerLinger(7 * time.Millisecond)}, 7 * time.Millisecond}} {
		cfg := shareConfig(c, t, "t", kafkatest.UniqueName("g"), shareHandler)
		cfg.Share.FromEarliest = false
		cfg.ClientOpts = append(cfg.ClientOpts, tc.opts...)
		m, err := consumer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Client().OptValue(kgo.ProducerLinger); got != tc.want {
			t.Errorf("linger %v, want %v", got, tc.want)
		}
		m.Close()
	}
}
