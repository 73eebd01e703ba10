package main

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/antidote-kafka/antidote/internal/pills"
)

// The workload's pills are the kinds of `antidote poison`, plus the null
// value; none reads as a chaos value, and a huge one fits the topic.
func TestPoisonKinds(t *testing.T) {
	const maxMessage = 256 << 10
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for i := range 1000 {
		v, kind := poison(r, i, maxMessage)
		seen[kind] = true
		if _, err := ParseValue(v); err == nil {
			t.Errorf("pill %d (%s) %.40q reads as a chaos value", i, kind, v)
		}
		if (v == nil) != (kind == "null") {
			t.Errorf("pill %d (%s): null %v", i, kind, v == nil)
		}
		if k, ok := pills.Find(kind); ok && kind != "huge" && !slices.Equal(v, k.Value(i, 0)) {
			t.Errorf("pill %d (%s) is not the command's pill %d of that kind", i, kind, i)
		}
		if kind == "huge" && (len(v) > maxMessage-4096 || len(v) < maxMessage/2) {
			t.Errorf("huge pill of %d bytes, topic limit %d", len(v), maxMessage)
		}
	}
	for _, k := range append(pills.Names(), "null") {
		if !seen[k] {
			t.Errorf("kind %s never drawn in 1000 pills", k)
		}
	}
}

// -without eos-delete leaves the delete fault out of exactly-once scenarios
// only.
func TestWithoutEOSDelete(t *testing.T) {
	var eos, other int
	for seed := uint64(1); seed <= 400; seed++ {
		sc := Generate(seed, "kfake", WithoutEOSDelete)
		deletes := slices.ContainsFunc(sc.Faults, func(f Fault) bool { return f.Kind == FaultDelete })
		if sc.Mode.ExactlyOnce && deletes {
			t.Fatalf("seed %d: an exactly-once scenario draws delete", seed)
		}
		if !sc.Mode.ExactlyOnce && deletes {
			other++
		}
		if sc.Mode.ExactlyOnce {
			eos++
		}
	}
	if eos == 0 || other == 0 {
		t.Fatalf("%d exactly-once scenarios, %d others with delete: the sample does not test the rule", eos, other)
	}
}
