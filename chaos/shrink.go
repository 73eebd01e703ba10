package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
)

// shrink looks for a smaller scenario that still fails with one of the
// violation kinds of res: without one of the faults, with half the records,
// with one member. Each candidate is run once (a flaky failure shrinks
// less), at most budget runs in all. It writes the smallest one found to
// shrunk.json in the failing run's folder and returns it with the path, or
// nil when no candidate failed.
func shrink(ctx context.Context, sc *Scenario, res Result, budget int, run func(*Scenario) (Result, error), logf func(string, ...any)) (*Scenario, string) {
	want := map[string]bool{}
	for _, v := range res.Violations {
		want[v.Kind] = true
	}
	var best *Scenario
	cur := sc
	tries := 0
	for improved := true; improved && tries < budget && ctx.Err() == nil; {
		improved = false
		for _, c := range candidates(cur) {
			if tries >= budget || ctx.Err() != nil {
				break
			}
			tries++
			c.Try = sc.Try + tries
			r, err := run(c)
			if err != nil {
				return best, ""
			}
			same := false
			for _, v := range r.Violations {
				same = same || want[v.Kind]
			}
			logf("shrink seed %d, try %d (%d records, %d faults, %d members): %d violations", sc.Seed, tries, c.Records, len(c.Faults), c.Members, len(r.Violations))
			if same {
				best, cur, improved = c, c, true
				break
			}
		}
	}
	if best == nil || res.Dir == "" {
		return nil, ""
	}
	path := filepath.Join(res.Dir, "shrunk.json")
	b, _ := json.MarshalIndent(best, "", "  ")
	if os.WriteFile(path, b, 0o644) != nil {
		return nil, ""
	}
	return best, path
}

// candidates are the scenarios one step smaller than sc.
func candidates(sc *Scenario) []*Scenario {
	var out []*Scenario
	clone := func() *Scenario {
		c := *sc
		c.Faults = append([]Fault(nil), sc.Faults...)
		return &c
	}
	for i := range sc.Faults {
		c := clone()
		c.Faults = append(c.Faults[:i], c.Faults[i+1:]...)
		out = append(out, c)
	}
	if sc.Records >= 20 {
		c := clone()
		c.Records /= 2
		c.ProduceMs = max(500, c.ProduceMs/2)
		for j := range c.Faults {
			c.Faults[j].AtMs = min(c.Faults[j].AtMs, c.ProduceMs+2000)
		}
		out = append(out, c)
	}
	if sc.Members > 1 {
		c := clone()
		c.Members = 1
		out = append(out, c)
	}
	return out
}
