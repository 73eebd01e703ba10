package consumer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRecordLogIdleSummaryOncePerWindow: a trickle of failing records, with
// the partition idle between each, writes one summary at the first idle
// moment of a window, not one per record; the lines suppressed after it are
// told when the partition stops, and none is lost from the count. (Before:
// each idle moment wrote a summary of the one line suppressed since, a
// line per record again; seen in a chaos run's logs.)
func TestRecordLogIdleSummaryOncePerWindow(t *testing.T) {
	var buf bytes.Buffer
	r := newRecordLog(slog.New(slog.NewJSONHandler(&buf, nil)), "orders", 3)
	rec := &kgo.Record{Topic: "orders", Partition: 3}
	for i := 0; i < logBurst+30; i++ {
		r.warn("record dead-lettered", rec)
		r.idle()
	}
	r.summary() // the partition stops
	var lines, summaries, suppressed int
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "record dead-lettered" {
			lines++
			continue
		}
		summaries++
		suppressed += int(m["suppressed"].(float64))
	}
	if lines != logBurst || suppressed != 30 || summaries != 2 {
		t.Fatalf("%d lines, %d summaries of %d suppressed; want %d lines, 2 summaries (the first idle moment, the stop) of 30", lines, summaries, suppressed, logBurst)
	}
}
