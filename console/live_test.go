package console

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/consumer"
)

// TestLiveView: the charts show the rates between samples, the lag and
// the longest stuck time, the newest value and the largest.
func TestLiveView(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ss := []sample{
		{at: t0, processed: 0, deadLettered: 0, lag: 100},
		{at: t0.Add(5 * time.Second), processed: 50, deadLettered: 5, lag: 40, stuckFor: 3 * time.Second},
		{at: t0.Add(10 * time.Second), processed: 60, deadLettered: 5, lag: 0, stuckFor: 8 * time.Second},
	}
	v := (&live{every: 5 * time.Second}).view(ss, true)
	if !v.On || v.Every != 5 || v.Samples != 3 || v.Span != "10s" {
		t.Errorf("view %+v", v)
	}
	want := map[string][2]string{"processed": {"2.0", "10.0"}, "dead-lettered": {"0.0", "1.0"}, "lag": {"0", "100"}, "stuck": {"8", "8"}}
	for _, c := range v.Charts {
		w, ok := want[c.ID]
		if !ok || c.Now != w[0] || c.Max != w[1] || c.Points == "" {
			t.Errorf("chart %s: now %s max %s points %q, want %v", c.ID, c.Now, c.Max, c.Points, w)
		}
	}
	if empty := (&live{every: time.Second}).view(nil, false); empty.Charts[0].Now != "-" || empty.Charts[0].Points != "" {
		t.Errorf("no samples: %+v", empty.Charts[0])
	}
	// A counter that went back (a restart) is no negative rate.
	back := (&live{every: time.Second}).view([]sample{{at: t0, processed: 9}, {at: t0.Add(time.Second), processed: 2}}, false)
	if back.Charts[0].Now != "0.0" {
		t.Errorf("a counter that went back: %s/s", back.Charts[0].Now)
	}
}

// countingConsumer counts up with every Stats.
type countingConsumer struct {
	admin.Consumer
	n atomic.Uint64
}

func (c *countingConsumer) Stats() consumer.Stats {
	n := c.n.Add(1)
	return consumer.Stats{Processed: n * 10, Partitions: []consumer.Partition{{Lag: int64(n)}}}
}

// TestLiveSampler: the sampler's goroutine samples every consumer at its
// pace, keeps at most liveKeep samples, answers with copies, and stops.
func TestLiveSampler(t *testing.T) {
	c := &countingConsumer{}
	l := startLive(map[string]admin.Consumer{"a": c}, time.Millisecond)
	deadline := time.Now().Add(30 * time.Second)
	for len(l.samples("a")) < liveKeep && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for c.n.Load() < liveKeep+20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ss := l.samples("a")
	if len(ss) != liveKeep || ss[len(ss)-1].processed <= ss[0].processed {
		t.Fatalf("%d samples (want %d), processed %d..%d", len(ss), liveKeep, ss[0].processed, ss[len(ss)-1].processed)
	}
	ss[0].processed = 1 << 60 // a copy: the sampler's own stays
	if l.samples("a")[0].processed == 1<<60 {
		t.Error("samples shares the sampler's slice")
	}
	if got := l.samples("nobody"); len(got) != 0 {
		t.Errorf("samples of an unknown consumer: %d", len(got))
	}
	l.close()
	if got := l.samples("a"); got != nil {
		t.Errorf("after close: %d samples", len(got))
	}
}
