package dlq

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// evil retitles the terminal, clears it, moves the cursor back over the
// line and overrides the direction of the text that follows.
const evil = "\x1b]0;pwned\x07\x1b[2J\r\u202eok\u009b31m"

// TestShowEscapes: dlq show prints no control or escape sequence that a
// letter carries, in any field, the stack trace, the key or the value.
func TestShowEscapes(t *testing.T) {
	now := time.Now()
	f := &deadletter.Failure{
		Stage: deadletter.Stage("process" + evil), Reason: deadletter.Reason("permanent" + evil), Class: "permanent" + evil,
		ErrorType: "*errors.errorString" + evil, Message: "boom" + evil, Topic: "orders", Partition: 0, Offset: 1,
		Group: "g" + evil, ClientID: "c" + evil, Attempts: 1, First: now, Last: now,
	}
	var hs []kgo.RecordHeader
	for _, h := range f.AppendHeaders(nil) {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	spring := []kgo.RecordHeader{
		{Key: deadletter.SpringOriginalTopic, Value: []byte("orders")},
		{Key: deadletter.SpringOriginalGroup, Value: []byte("g" + evil)},
		{Key: deadletter.SpringExceptionFQCN, Value: []byte("org.example.Boom" + evil)},
		{Key: deadletter.SpringExceptionMessage, Value: []byte("boom" + evil)},
		{Key: deadletter.SpringExceptionStacktrace, Value: []byte("org.example.Boom: boom" + evil + "\n\tat x.y(Z.java:1)\nCaused by: root" + evil + "\n\tat a.b(C.java:2)")},
	}
	for _, tc := range []struct {
		name string
		rec  *kgo.Record
	}{
		{"antidote", &kgo.Record{Topic: "orders.dlq", Key: []byte("k" + evil), Value: []byte("v\r" + evil), Headers: hs, Timestamp: now}},
		{"spring", &kgo.Record{Topic: "orders.dlq", Key: []byte("k"), Value: []byte(`{"a":"` + "\u009b\u202e" + `"}`), Headers: spring, Timestamp: now}},
	} {
		l, err := deadletter.ParseRecord(tc.rec)
		for _, as := range []string{"", "text", "json"} {
			var b strings.Builder
			if err := printDLQShow(&b, dlqEntry{l: l, err: err}, as, now); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if i := strings.IndexFunc(out, func(r rune) bool {
				return r == 0x1b || r == '\r' || r == 0x07 || r == 0x9b || r == 0x202e
			}); i >= 0 {
				t.Errorf("%s letter, as %q: a control character in the output at %d: %q", tc.name, as, i, out[max(0, i-40):min(len(out), i+40)])
			}
			for _, want := range []string{`\x1b]0;pwned`} {
				if tc.name == "antidote" && !strings.Contains(out, want) {
					t.Errorf("%s letter: the escaped sequence %q is not shown:\n%s", tc.name, want, out)
				}
			}
		}
	}
}
