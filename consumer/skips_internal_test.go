package consumer

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// An operator's skips of a topic created again are forgotten, by the
// consumer and by a worker that outlives the recreation: the offsets they
// name are the old topic's, and a new record at one of them must be handled.
func TestForgetSkipsReachesLiveWorkers(t *testing.T) {
	c := &Consumer[string, string]{opSkips: map[tp]map[int64]bool{}, parts: map[tp]*partition[string, string]{}}
	tier, other := tp{"orders.retry.1s", 0}, tp{"orders", 0}
	for _, k := range []tp{tier, other} {
		c.opSkips[k] = map[int64]bool{5: true}
		p := &partition[string, string]{}
		m := map[int64]bool{5: true}
		p.skips.Store(&m)
		c.parts[k] = p
	}
	c.forgetSkips(tier.topic)
	if _, ok := c.opSkips[tier]; ok || c.parts[tier].skipped(5) {
		t.Errorf("the recreated topic's skip is still remembered (consumer %v, worker %v)", ok, c.parts[tier].skipped(5))
	}
	if !c.opSkips[other][5] || !c.parts[other].skipped(5) {
		t.Errorf("another topic's skip was forgotten")
	}
}

// A committed transaction prunes the skips below its offsets: they are
// settled for good, and the bound on remembered skips is left for new ones.
func TestPruneSkipsBelowCommitted(t *testing.T) {
	c := &Consumer[string, string]{opSkips: map[tp]map[int64]bool{}}
	a, b := tp{"orders", 0}, tp{"orders", 1}
	c.opSkips[a] = map[int64]bool{3: true, 9: true}
	c.opSkips[b] = map[int64]bool{4: true}
	c.pruneSkips(map[tp]kgo.EpochOffset{a: {Offset: 9}, b: {Offset: 5}})
	if got := c.opSkips[a]; len(got) != 1 || !got[9] {
		t.Errorf("skips of %v = %v; want only 9 (not yet committed past)", a, got)
	}
	if _, ok := c.opSkips[b]; ok {
		t.Errorf("skips of %v = %v; want none left", b, c.opSkips[b])
	}
}
