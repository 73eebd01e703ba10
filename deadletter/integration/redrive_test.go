package integration_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

func readAll(t *testing.T, cl *kgo.Client, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: topic, IdleTimeout: 3 * time.Second}, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", topic, err)
	}
	return out
}

// fixture is a dead-letter topic whose letters come from every dialect and
// point at one source topic.
type fixture struct {
	cl       *kgo.Client
	dlq, src string
	// want maps a value to the original headers its redrive must carry.
	want map[string]hs
}

func newFixture(t *testing.T) *fixture {
	c := kafkatest.New(t)
	fx := &fixture{
		cl:   c.Client(t, append(deadletter.ScanOpts(), kgo.FetchMaxWait(200*time.Millisecond))...),
		dlq:  c.Topic(t, "dlq", 2),
		src:  c.Topic(t, "src", 2),
		want: map[string]hs{},
	}
	t.Logf("cluster %s", c)
	orig := func(i int) hs { return hs{h("trace", fmt.Sprint(i)), {Key: "bin", Value: []byte{0, byte(i), 0xff}}} }
	var rs []*kgo.Record
	add := func(value string, headers hs, want hs) {
		rs = append(rs, &kgo.Record{Topic: fx.dlq, Partition: int32(len(rs) % 2), Key: []byte("key-" + value), Value: []byte(value), Headers: kafkatest.Headers(headers)})
		if want != nil {
			fx.want[value] = want
		}
	}
	for i := range 4 {
		add(fmt.Sprintf("antidote-%d", i), antidoteLetter(orig(i), fx.src, 1, int64(i)), orig(i))
	}
	add("spring", springLetter(orig(10), fx.src, 0, 10), orig(10))
	add("connect", connectLetter(orig(11), fx.src, 1, 11), orig(11))
	add("streams", streamsLetter(orig(12), fx.src, 0, 12), orig(12))
	add("share", shareLetter(fx.src, 1, 13), hs{})
	// An earlier redrive's provenance headers are replaced, and counted.
	again := append(orig(14), h(deadletter.HeaderRedriveCount, "1"), h(deadletter.HeaderRedriveFrom, "x/0/0"))
	add("again", antidoteLetter(again, fx.src, 0, 14), orig(14))
	// Refused: past the redrive limit, no known headers, malformed.
	add("looping", antidoteLetter(append(orig(15), h(deadletter.HeaderRedriveCount, "3")), fx.src, 0, 15), nil)
	add("stranger", orig(16), nil)
	bad := springLetter(orig(17), fx.src, 0, 17)
	for i := range bad {
		if bad[i].Key == deadletter.SpringOriginalPartition {
			bad[i].Value = []byte{0, 1}
		}
	}
	add("malformed", bad, nil)
	for _, r := range rs {
		kafkatest.Produce(t, fx.cl, r)
	}
	return fx
}

// check verifies that the source topic holds every expected letter's
// original record exactly once, with its provenance.
func (fx *fixture) check(t *testing.T) {
	t.Helper()
	got := readAll(t, fx.cl, fx.src)
	seen := map[string]int{}
	for _, r := range got {
		v := string(r.Value)
		seen[v]++
		want, ok := fx.want[v]
		if !ok {
			t.Errorf("unexpected record %q redriven", v)
			continue
		}
		if string(r.Key) != "key-"+v {
			t.Errorf("%s: key %q", v, r.Key)
		}
		n := len(r.Headers)
		if n < 2 || !reflect.DeepEqual(hsOf(r.Headers[:n-2]), want) {
			t.Errorf("%s: headers %v, want %v + provenance", v, hsOf(r.Headers), want)
			continue
		}
		wantCount := "1"
		if v == "again" {
			wantCount = "2"
		}
		if k, c := r.Headers[n-2].Key, string(r.Headers[n-2].Value); k != deadletter.HeaderRedriveCount || c != wantCount {
			t.Errorf("%s: %s=%s, want %s=%s", v, k, c, deadletter.HeaderRedriveCount, wantCount)
		}
		if k := r.Headers[n-1].Key; k != deadletter.HeaderRedriveFrom {
			t.Errorf("%s: last header %s", v, k)
		}
	}
	for v := range fx.want {
		if seen[v] != 1 {
			t.Errorf("%s redriven %d times, want once", v, seen[v])
		}
	}
}

func hsOf(in []kgo.RecordHeader) hs {
	out := make(hs, len(in))
	for i, h := range in {
		out[i] = deadletter.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func TestIntegrationRedrive(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	cfg := deadletter.RedriveConfig{Topic: fx.dlq, IdleTimeout: 3 * time.Second}

	dry := cfg
	dry.DryRun = true
	res, err := deadletter.Redrive(ctx, fx.cl, dry)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if res.Redriven != len(fx.want) || res.Refused != 3 || len(readAll(t, fx.cl, fx.src)) != 0 {
		t.Fatalf("dry run: %+v", res)
	}

	// Interrupted after three records, then resumed twice.
	ictx, cancel := context.WithCancel(ctx)
	first := cfg
	first.BatchRecords = 1 // every letter committed on its own
	first.Progress = func(r deadletter.RedriveResult) {
		if r.Redriven == 3 {
			cancel()
		}
	}
	res, err = deadletter.Redrive(ictx, fx.cl, first)
	cancel()
	if !errors.Is(err, context.Canceled) || res.Redriven != 3 {
		t.Fatalf("interrupted redrive: %+v, %v", res, err)
	}
	done, refused := res.Redriven, res.Refused
	second := cfg
	second.Limit = 2
	if res, err = deadletter.Redrive(ctx, fx.cl, second); err != nil || res.Redriven != 2 {
		t.Fatalf("limited redrive: %+v, %v", res, err)
	}
	done, refused = done+res.Redriven, refused+res.Refused
	if res, err = deadletter.Redrive(ctx, fx.cl, cfg); err != nil {
		t.Fatalf("resumed redrive: %v", err)
	}
	done, refused = done+res.Redriven, refused+res.Refused
	if done != len(fx.want) {
		t.Errorf("redriven %d in all, want %d", done, len(fx.want))
	}
	if refused != 3 {
		t.Errorf("refused %d in all, want 3", refused)
	}
	fx.check(t)

	// Nothing is left: a fourth run redrives nothing.
	if res, err = deadletter.Redrive(ctx, fx.cl, cfg); err != nil || res.Scanned != 0 || res.Redriven != 0 {
		t.Errorf("fourth run: %+v, %v", res, err)
	}
}

// The loop guard: a record that fails every time it is redriven is
// refused once it was redriven MaxRedrives times.
func TestIntegrationRedriveLoopGuard(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t, append(deadletter.ScanOpts(), kgo.FetchMaxWait(200*time.Millisecond))...)
	src, dlq := c.Topic(t, "src", 1), c.Topic(t, "dlq", 1)
	ctx := context.Background()
	kafkatest.Produce(t, cl, &kgo.Record{Topic: dlq, Value: []byte("poison"), Headers: kafkatest.Headers(antidoteLetter(nil, src, 0, 0))})
	for round := 1; ; round++ {
		res, err := deadletter.Redrive(ctx, cl, deadletter.RedriveConfig{Topic: dlq, MaxRedrives: 2, IdleTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if round == 3 {
			if res.Redriven != 0 || res.Refused != 1 {
				t.Fatalf("round 3: %+v, want the record refused", res)
			}
			t.Logf("refused: %s", res.Refusals[0].Reason)
			return
		}
		if res.Redriven != 1 {
			t.Fatalf("round %d: %+v", round, res)
		}
		// The consumer fails again and dead-letters the redriven record,
		// headers and all.
		got := readAll(t, cl, src)
		last := got[len(got)-1]
		kafkatest.Produce(t, cl, &kgo.Record{Topic: dlq, Value: last.Value, Headers: kafkatest.Headers(antidoteLetter(hsOf(last.Headers), src, 0, last.Offset))})
	}
}

func TestIntegrationScanUnknownTopic(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: "no-such-topic-" + kafkatest.UniqueName("x")}, func(*kgo.Record) error { return nil })
	if !errors.Is(err, deadletter.ErrUnknownTopic) {
		t.Fatalf("err = %v, want ErrUnknownTopic", err)
	}
	if _, err := deadletter.Redrive(ctx, cl, deadletter.RedriveConfig{Topic: "no-such-topic-x1"}); !errors.Is(err, deadletter.ErrUnknownTopic) {
		t.Fatalf("redrive err = %v, want ErrUnknownTopic", err)
	}
	// An empty topic ends at once.
	empty := c.Topic(t, "empty", 3)
	start := time.Now()
	if err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: empty}, func(*kgo.Record) error { return errors.New("no record expected") }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("empty scan took %v", d)
	}
}

// A missing target topic ends the redrive before anything is produced to
// it, and names the topic.
func TestIntegrationRedriveUnknownTarget(t *testing.T) {
	c := kafkatest.New(t, kfake.AllowAutoTopicCreation())
	cl := c.Client(t, deadletter.ScanOpts()...)
	dlq := c.Topic(t, "dlq", 1)
	missing := kafkatest.UniqueName("missing")
	kafkatest.Produce(t, cl, &kgo.Record{Topic: dlq, Value: []byte("a"), Headers: kafkatest.Headers(antidoteLetter(nil, missing, 0, 0))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, cfg := range []deadletter.RedriveConfig{{Topic: dlq}, {Topic: dlq, To: missing + "-to"}} {
		res, err := deadletter.Redrive(ctx, cl, cfg)
		var ute *deadletter.UnknownTargetError
		if !errors.As(err, &ute) || !strings.HasPrefix(ute.Topic, missing) || res.Redriven != 0 {
			t.Fatalf("redrive to a missing topic: %+v, %v", res, err)
		}
		t.Logf("%v", err)
	}
	// Not created on the way (auto-creation is on in kfake here).
	if _, _, err := deadletter.Bounds(ctx, cl, missing); !errors.Is(err, deadletter.ErrUnknownTopic) {
		t.Errorf("the target was created: %v", err)
	}
}

// A relative filter (MaxAge) keeps its group from run to run: the second
// run resumes, and nothing is redriven twice. Batches are pipelined.
func TestIntegrationRedriveRelativeResumes(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t, append(deadletter.ScanOpts(), kgo.ProducerLinger(5*time.Millisecond))...)
	src, dlq := c.Topic(t, "src", 2), c.Topic(t, "dlq", 2)
	const n = 2000
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: dlq, Value: []byte(strconv.Itoa(i)), Headers: kafkatest.Headers(antidoteLetter(nil, src, 0, int64(i)))}
	}
	kafkatest.Produce(t, cl, rs...)
	cfg := deadletter.RedriveConfig{Topic: dlq, Filter: deadletter.Filter{MaxAge: 24 * time.Hour}, BatchRecords: 300}
	ctx := context.Background()
	first := cfg
	first.Limit = 700
	start := time.Now()
	r1, err := deadletter.Redrive(ctx, cl, first)
	if err != nil {
		t.Fatal(err)
	}
	// The second run resolves its relative filter at another "now".
	firstDone := time.Now().Round(0) // the wall clock, as the filter reads it
	kafkatest.WaitFor(t, time.Second, "the wall clock to move past the first run", func() bool { return time.Now().Round(0).After(firstDone) })
	r2, err := deadletter.Redrive(ctx, cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d letters redriven in %v (batches of %d)", c.Kind(), r1.Redriven+r2.Redriven, time.Since(start), cfg.BatchRecords)
	if r1.Group != r2.Group || r1.Redriven < 700 || r1.Redriven+r2.Redriven != n {
		t.Fatalf("first %+v, then %+v", r1, r2)
	}
	seen := map[string]int{}
	for _, r := range readAll(t, cl, src) {
		seen[string(r.Value)]++
	}
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			t.Fatalf("letter %d redriven %d times", i, seen[strconv.Itoa(i)])
		}
	}
}
