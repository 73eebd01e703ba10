package main

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// The oracle must see each kind of broken promise: these facts are made up,
// each with one defect.

func testScenario() *Scenario {
	return &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 3, Protocol: "classic", ExactlyOnce: true}}
}

func src(sc *Scenario, p int32, o int64, key string, v Value) *kgo.Record {
	return &kgo.Record{Topic: sc.Source(), Partition: p, Offset: o, Key: []byte(key), Value: v.Encode(0)}
}

func call(sc *Scenario, p int32, o int64, res string, t0, t1 int64) Event {
	return Event{Ev: "call", Topic: sc.Source(), Part: p, Offset: o, Res: res, T0: t0, T1: t1, Att: 1}
}

func letterOf(sc *Scenario, r *kgo.Record, attempts int) *kgo.Record {
	return &kgo.Record{Topic: sc.DLQ(), Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{
		{Key: deadletter.HeaderOriginalTopic, Value: []byte(sc.Source())},
		{Key: deadletter.HeaderOriginalPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		{Key: deadletter.HeaderOriginalOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		{Key: deadletter.HeaderAttempts, Value: []byte(strconv.Itoa(attempts))},
		{Key: deadletter.HeaderStage, Value: []byte(deadletter.StageProcess)},
	}}
}

func output(p int32, o int64) *kgo.Record {
	return &kgo.Record{Value: []byte(strconv.Itoa(int(p)) + "/" + strconv.FormatInt(o, 10))}
}

func byKind(vs []Violation) map[string]int {
	m := map[string]int{}
	for _, v := range vs {
		m[v.Kind]++
	}
	return m
}

func TestOracleClean(t *testing.T) {
	sc := testScenario()
	a, b := src(sc, 0, 0, "k", Value{ID: 0}), src(sc, 0, 1, "k", Value{ID: 1, Perm: true})
	f := &facts{source: []*kgo.Record{a, b}, letters: []*kgo.Record{letterOf(sc, b, 1)}, outputs: []*kgo.Record{output(0, 0)},
		ends: map[int32]int64{0: 2}, committed: map[int32]int64{0: 2},
		events: []Event{call(sc, 0, 0, "ok", 1, 2), call(sc, 0, 1, "permanent", 3, 4)}}
	if vs := judge(sc, f); len(vs) > 0 {
		t.Fatalf("violations in a clean run: %v", vs)
	}
}

func TestOracleFindsDefects(t *testing.T) {
	sc := testScenario()
	ok := src(sc, 0, 0, "k", Value{ID: 0})
	lost := src(sc, 0, 1, "k", Value{ID: 1})
	early := src(sc, 0, 2, "k", Value{ID: 2, Fail: 1}) // fails once of 3 tries: must not be dead-lettered
	dup := src(sc, 1, 0, "j", Value{ID: 3})
	late := src(sc, 1, 1, "j", Value{ID: 4})
	f := &facts{
		source:    []*kgo.Record{ok, lost, early, dup, late},
		letters:   []*kgo.Record{letterOf(sc, early, 2)},
		outputs:   []*kgo.Record{output(0, 0), output(1, 0), output(1, 0), output(1, 1)},
		ends:      map[int32]int64{0: 3, 1: 2},
		committed: map[int32]int64{0: 3, 1: 1},
		events: []Event{
			call(sc, 0, 0, "ok", 1, 2),
			call(sc, 0, 2, "transient", 3, 4),
			call(sc, 1, 1, "ok", 5, 6), // before the record ahead of it
			call(sc, 1, 0, "ok", 7, 8),
		},
	}
	got := byKind(judge(sc, f))
	for _, k := range []string{"lost", "unexpected-letter", "attempts-ahead", "duplicate-output", "order", "commit-behind"} {
		if got[k] == 0 {
			t.Errorf("no %s violation; got %v", k, got)
		}
	}
}
