package deadletter_test

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// referenceHeaders is the failure headers of f written the plain way, with
// strconv and time.Format: what AppendHeaders must write byte for byte.
func referenceHeaders(f *deadletter.Failure) []deadletter.Header {
	var hs []deadletter.Header
	str := func(k, v string) { hs = append(hs, deadletter.Header{Key: k, Value: []byte(v)}) }
	num := func(k string, v int64) { str(k, strconv.FormatInt(v, 10)) }
	tm := func(k string, t time.Time) { str(k, t.UTC().Format(deadletter.TimeLayout)) }
	str(deadletter.HeaderStage, string(f.Stage))
	str(deadletter.HeaderReason, string(f.Reason))
	str(deadletter.HeaderClass, f.Class)
	str(deadletter.HeaderErrorType, deadletter.Truncate(f.ErrorType, deadletter.MaxValueBytes))
	if s := deadletter.Truncate(f.ErrorStage, deadletter.MaxValueBytes); s != "" {
		str(deadletter.HeaderErrorStage, s)
	}
	str(deadletter.HeaderErrorMessage, deadletter.Truncate(f.Message, deadletter.MaxMessageBytes))
	str(deadletter.HeaderOriginalTopic, f.Topic)
	num(deadletter.HeaderOriginalPartition, int64(f.Partition))
	num(deadletter.HeaderOriginalOffset, f.Offset)
	tm(deadletter.HeaderOriginalTimestamp, f.Timestamp)
	num(deadletter.HeaderOriginalHeaders, int64(f.OriginalHeaders))
	if s := deadletter.Truncate(f.Group, deadletter.MaxValueBytes); s != "" {
		str(deadletter.HeaderGroup, s)
	}
	if s := deadletter.Truncate(f.ClientID, deadletter.MaxValueBytes); s != "" {
		str(deadletter.HeaderClientID, s)
	}
	num(deadletter.HeaderAttempts, int64(f.Attempts))
	tm(deadletter.HeaderFirstFailure, f.First)
	tm(deadletter.HeaderLastFailure, f.Last)
	return hs
}

// TestAppendHeadersBytes: for failures with empty, long, non-UTF-8 and
// shared strings and any times, AppendHeaders writes the reference headers
// byte for byte, every value is non-nil and full (len == cap: appending to
// one cannot reach another), and the original headers are kept in front.
func TestAppendHeadersBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	text := func() string {
		switch r.IntN(5) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("é", r.IntN(800))
		case 2:
			return "bad \xff\xfe utf-8 " + strings.Repeat("x", r.IntN(300))
		case 3:
			return "group-7"
		}
		return strconv.Itoa(r.Int())
	}
	when := func() time.Time {
		if r.IntN(10) == 0 {
			return time.Time{}
		}
		return time.Unix(r.Int64N(1<<35)-1<<34, r.Int64N(1e9))
	}
	for i := range 2000 {
		f := &deadletter.Failure{
			Stage: deadletter.Stage(text()), Reason: deadletter.Reason(text()), Class: text(),
			ErrorType: text(), ErrorStage: text(), Message: text(), Topic: text(),
			Partition: r.Int32() - 1<<30, Offset: r.Int64() - 1<<62, Timestamp: when(), OriginalHeaders: r.IntN(3),
			Group: text(), ClientID: text(), Attempts: r.IntN(1000), First: when(), Last: when(),
		}
		orig := []deadletter.Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}[:f.OriginalHeaders]
		got := f.AppendHeaders(append([]deadletter.Header(nil), orig...))
		want := append(append([]deadletter.Header(nil), orig...), referenceHeaders(f)...)
		if len(got) != len(want) {
			t.Fatalf("case %d: %d headers, want %d", i, len(got), len(want))
		}
		for j, h := range got {
			if h.Key != want[j].Key || !bytes.Equal(h.Value, want[j].Value) {
				t.Fatalf("case %d: header %d = %s=%q, want %s=%q", i, j, h.Key, h.Value, want[j].Key, want[j].Value)
			}
			if j >= len(orig) && (h.Value == nil || len(h.Value) != cap(h.Value)) {
				t.Fatalf("case %d: header %s: nil %v, len %d, cap %d", i, h.Key, h.Value == nil, len(h.Value), cap(h.Value))
			}
		}
	}
}
