package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// FuzzParseRetry: the retry headers of a record read from a tier topic are
// hostile input (anyone may write to the topic). Parsing never panics, and
// what it accepts names a tier count and a due time it wrote itself.
func FuzzParseRetry(f *testing.F) {
	good := func(tiers, forwards int, parked bool) []kgo.RecordHeader {
		fl := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: ReasonRetryTopic, Topic: "orders", Partition: 3, Offset: 42,
			OriginalHeaders: 1, Attempts: 2, First: time.Unix(1700000000, 0), Last: time.Unix(1700000001, 0)}
		hs := []deadletter.Header{{Key: "trace", Value: []byte("x")}}
		hs = fl.AppendHeaders(hs)
		out := make([]kgo.RecordHeader, 0, len(hs)+3)
		for _, h := range hs {
			out = append(out, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		return append(out, retryHeaders(tiers, forwards, time.Unix(1700000002, 0), parked)...)
	}
	enc := func(hs []kgo.RecordHeader) []byte {
		var b []byte
		for _, h := range hs {
			b = append(b, h.Key...)
			b = append(b, 0)
			b = append(b, h.Value...)
			b = append(b, 0)
		}
		return b
	}
	f.Add(enc(good(1, 1, false)))
	f.Add(enc(good(0, 3, true)))
	f.Add([]byte("antidote.retry.tier\x00-1\x00antidote.retry.due\x00yesterday\x00"))
	f.Add([]byte("antidote.retry.forwards\x0099999999999999999999\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var hs []kgo.RecordHeader
		for len(b) > 0 {
			k, rest, _ := cut(b)
			v, rest2, _ := cut(rest)
			hs = append(hs, kgo.RecordHeader{Key: string(k), Value: v})
			b = rest2
		}
		st, err := parseRetry(hs)
		if err != nil {
			return
		}
		if st.f == nil || st.tiers < 0 || st.forwards < 0 || st.due.IsZero() {
			t.Fatalf("accepted %+v", st)
		}
		rec := &kgo.Record{Headers: hs}
		if o := st.original(rec); len(o.Headers) > len(hs) {
			t.Fatalf("original has %d headers of %d", len(o.Headers), len(hs))
		}
	})
}

func cut(b []byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == 0 {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// TestParseRetryRoundTrip: what a forward writes, parseRetry reads back.
func TestParseRetryRoundTrip(t *testing.T) {
	due := time.Date(2026, 12, 1, 10, 0, 0, 123e6, time.UTC)
	fl := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: ReasonRetryTopic, Topic: "orders", Partition: 3, Offset: 42,
		OriginalHeaders: 1, Attempts: 2, First: due.Add(-time.Minute), Last: due.Add(-time.Second)}
	hs := fl.AppendHeaders([]deadletter.Header{{Key: "trace", Value: []byte("x")}})
	rec := &kgo.Record{Key: []byte("k"), Value: []byte("v")}
	for _, h := range hs {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	rec.Headers = append(rec.Headers, retryHeaders(2, 5, due, true)...)
	st, err := parseRetry(rec.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if st.tiers != 2 || st.forwards != 5 || !st.parked || !st.due.Equal(due) || st.f.Attempts != 2 || st.f.Offset != 42 {
		t.Fatalf("read back %+v (failure %+v)", st, st.f)
	}
	o := st.original(rec)
	if o.Topic != "orders" || o.Partition != 3 || o.Offset != 42 || len(o.Headers) != 1 || o.Headers[0].Key != "trace" {
		t.Fatalf("original %+v", o)
	}
	if _, err := parseRetry(rec.Headers[:1]); err == nil {
		t.Fatal("a record without retry headers was accepted")
	}
}
