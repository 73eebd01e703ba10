package deadletter

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRedriveHeadersTrace: a letter written by a traced consumer gives the
// redriven record the trace context of the letter's write
// (HeaderRedriveTrace), once, after its original headers, which keep their
// own traceparent; a letter without one gives none.
func TestRedriveHeadersTrace(t *testing.T) {
	const (
		orig   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		letter = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
		older  = "00-0af7651916cd43dd8448eb211c80319c-b9c7c989f97918e1-01"
	)
	original := []Header{{Key: "traceparent", Value: []byte(orig)}, {Key: HeaderRedriveTrace, Value: []byte(older)}}
	f := &Failure{Stage: StageProcess, Reason: ReasonPermanent, Class: "permanent", Message: "bad", Topic: "orders",
		Partition: 1, Offset: 7, Timestamp: time.Unix(1, 0), OriginalHeaders: len(original), Group: "billing", Attempts: 1,
		First: time.Unix(2, 0), Last: time.Unix(2, 0)}
	for _, traced := range []bool{true, false} {
		hs := f.AppendHeaders(append([]Header(nil), original...))
		if traced {
			hs = append(hs, Header{Key: HeaderTraceLetter, Value: []byte(letter)})
		}
		rec := &kgo.Record{Topic: "orders.dlq", Partition: 1, Offset: 3, Value: []byte("x")}
		for _, h := range hs {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		l, err := Parse(RecordOf(rec))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, h := range redriveHeaders(l, rec) {
			got[h.Key] = append(got[h.Key], string(h.Value))
		}
		if tp := got["traceparent"]; len(tp) != 1 || tp[0] != orig {
			t.Errorf("traced=%v: traceparent %q, want the original's", traced, tp)
		}
		want := []string{letter}
		if !traced {
			want = nil
		}
		if rt := got[HeaderRedriveTrace]; len(rt) != len(want) || (len(want) == 1 && rt[0] != want[0]) {
			t.Errorf("traced=%v: %s %q, want %q (an older one replaced)", traced, HeaderRedriveTrace, rt, want)
		}
	}
}
