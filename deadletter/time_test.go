package deadletter

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendTime: the letter's timestamps are what t.UTC().Format(TimeLayout)
// writes, for any time.
func TestAppendTime(t *testing.T) {
	times := []time.Time{
		{}, time.Unix(0, 0), time.Date(2026, 12, 1, 9, 5, 7, 999_999_999, time.UTC),
		time.Date(1999, 1, 31, 23, 59, 59, 1_000_000, time.FixedZone("x", -5*3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		times = append(times, time.Unix(r.Int64N(1<<34)-1<<33, r.Int64N(1e9)))
	}
	for _, tm := range times {
		if got, want := string(appendTime(nil, tm)), tm.UTC().Format(TimeLayout); got != want {
			t.Fatalf("appendTime(%v) = %q; want %q", tm, got, want)
		}
	}
}
