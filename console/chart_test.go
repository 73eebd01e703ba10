package console

import (
	"testing"
	"time"
)

// TestChartAxis: with few buckets, the bars take the left of the plot and
// the label of its right edge is the time of that edge, not of the last
// bucket's end.
func TestChartAxis(t *testing.T) {
	s := newTopicStats("reason")
	s.width = time.Minute
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, n := range []int{3, 0, 5} { // three buckets: 12:00, (none at 12:01), 12:02
		if n == 0 {
			continue
		}
		s.buckets[t0.Add(time.Duration(i)*time.Minute).Unix()/60] = map[string]int{"timeout": n}
	}
	c := s.chart()
	if c.From != "2026-05-01T12:00:00Z" {
		t.Errorf("From %s, want 12:00", c.From)
	}
	// 24 slots of a minute: the right edge is 12:24.
	if c.To != "2026-05-01T12:24:00Z" {
		t.Errorf("To %s, want 2026-05-01T12:24:00Z (24 slots of 1m from 12:00)", c.To)
	}
	plotW := chartW - chartLeft
	last := c.Bars[len(c.Bars)-1].Rects[0]
	if want := chartLeft + 2*plotW/24; last.X != want {
		t.Errorf("the 12:02 bar at x %d, want %d (2 of 24 slots)", last.X, want)
	}
}
