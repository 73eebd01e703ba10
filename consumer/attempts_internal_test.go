package consumer

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// TestAttemptEntryRoundTrip: an entry, with or without the failure of a
// record that used its tries, reads back as written, whatever its message
// holds.
func TestAttemptEntryRoundTrip(t *testing.T) {
	first := time.Date(2026, 12, 6, 4, 42, 5, 717e6, time.UTC)
	for _, e := range []attemptEntry{
		{offset: 40, attempts: 2, first: first},
		{offset: 0, attempts: 3, first: first, used: &usedTries{ts: 1796534724029, stage: deadletter.StageProcess, class: failure.ClassTransient,
			reason: deadletter.ReasonExhausted, forward: true, errType: "*errors.errorString", msg: "record 163 fails on attempt 3 of 5"}},
		{offset: 7, attempts: 1, first: first, used: &usedTries{ts: -1, stage: deadletter.StageDeserializeValue, class: failure.ClassPermanent,
			reason: deadletter.ReasonOperator, errStage: "schema", msg: "a=b c\td\n%zz\x00 attempts=9 ü"}},
	} {
		got, err := decodeAttempt(e.encode())
		if err != nil {
			t.Fatalf("%s: %v", e.encode(), err)
		}
		if got.offset != e.offset || got.attempts != e.attempts || !got.first.Equal(e.first) || (got.used == nil) != (e.used == nil) ||
			e.used != nil && *got.used != *e.used {
			t.Errorf("%s read back as %+v (used %+v)", e.encode(), got, got.used)
		}
	}
}

// TestUsedTriesErr: the failure read back keeps its class, its message and
// the type and serde stage its letter names, and is its record's only.
func TestUsedTriesErr(t *testing.T) {
	ts := time.UnixMilli(1796534724029)
	u := &usedTries{ts: ts.UnixMilli(), stage: deadletter.StageDeserializeValue, class: failure.ClassPermanent, reason: deadletter.ReasonPermanent,
		errType: "*json.SyntaxError", errStage: "decode", msg: "bad json"}
	err := u.err()
	if failure.Classify(err) != failure.ClassPermanent || err.Error() != "bad json" {
		t.Errorf("class %v, message %q", failure.Classify(err), err)
	}
	if f := newFailure("g", &kgo.Record{Topic: "orders"}, u.stage, u.class, u.reason, err, 3, time.Now()); f.ErrorType != "*json.SyntaxError" || f.ErrorStage != "decode" {
		t.Errorf("error type %q, stage %q", f.ErrorType, f.ErrorStage)
	}
	if !u.of(&kgo.Record{Timestamp: ts}) || u.of(&kgo.Record{Timestamp: ts.Add(time.Millisecond)}) {
		t.Error("the entry names its record by timestamp")
	}
}

// TestDecodeAttemptRefuses: a value that is not a whole entry is refused,
// not half read.
func TestDecodeAttemptRefuses(t *testing.T) {
	used := attemptEntry{offset: 1, attempts: 3, first: time.Unix(0, 0), used: &usedTries{stage: "process", reason: "permanent", msg: "x"}}.encode()
	for _, v := range []string{
		"offset=1 attempts=2",
		"offset=1 attempts=0 first=2026-12-06T04:42:05.717Z",
		"offset=1 offset=2 attempts=2 first=2026-12-06T04:42:05.717Z",
		"offset=1 attempts=2 first=2026-12-06T04:42:05.717Z stage=process",
		"offset=1 attempts=2 first=0000-01-01T00:00:00.000+01:00",
		strings.Replace(string(used), "then=dead-letter", "then=halt", 1),
		strings.Replace(string(used), "reason=permanent", "reason=", 1),
		string(used) + " more=1",
	} {
		if e, err := decodeAttempt([]byte(v)); err == nil {
			t.Errorf("%q read as %+v", v, e)
		}
	}
	if _, err := decodeAttempt(used); err != nil {
		t.Errorf("%s: %v", used, err)
	}
}

// FuzzDecodeAttempt: any value of the attempts topic decodes to an entry
// that encodes back to what decodes the same, or to an error; never a
// panic.
func FuzzDecodeAttempt(f *testing.F) {
	f.Add([]byte("offset=40 attempts=2 first=2026-12-06T04:42:05.717Z"))
	f.Add(attemptEntry{offset: 1, attempts: 3, first: time.Unix(0, 0), used: &usedTries{stage: "process", reason: "retries-exhausted",
		msg: "x y"}}.encode())
	f.Add([]byte("offset=1 attempts=3 first=2026-12-06T04:42:05.717Z stage=process class=transient reason=r then=x type=t err=%"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeAttempt(b)
		if err != nil {
			return
		}
		again, err := decodeAttempt(e.encode())
		if err != nil {
			t.Fatalf("%q decoded, but its encoding %q does not: %v", b, e.encode(), err)
		}
		if again.offset != e.offset || again.attempts != e.attempts || (again.used == nil) != (e.used == nil) ||
			e.used != nil && *again.used != *e.used {
			t.Fatalf("%q: %+v, then %+v", b, e, again)
		}
		if e.used != nil && strings.ContainsAny(string(e.encode()), "\n\t") {
			t.Fatalf("encoding %q holds a separator", e.encode())
		}
	})
}
