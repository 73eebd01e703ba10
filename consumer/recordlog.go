package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record-level log lines are rate-limited per partition: a poison storm must
// not write one line per record without bound. Each partition writes at most
// logBurst record-level lines per logWindow; the lines over that are counted
// (every record still is, in Stats) and a summary line says how many were
// suppressed: when the partition first goes idle in the window (at most once
// per window, so that a trickle of records with an idle moment between each
// does not write a summary per record), at its first line or idle moment
// after the window ended, and when the partition stops.
const (
	logBurst  = 20
	logWindow = 10 * time.Second
)

// recordLog writes the record-level lines of one partition, from its worker
// (and its lanes, with Concurrency).
type recordLog struct {
	mu    sync.Mutex
	l     *slog.Logger
	topic string
	part  int32

	start      time.Time // of the window
	lines      int       // written in the window
	suppressed int       // in the window, not summarized yet
	told       bool      // an idle summary was written in the window
}

func newRecordLog(l *slog.Logger, topic string, part int32) *recordLog {
	return &recordLog{l: l, topic: topic, part: part}
}

func (r *recordLog) warn(msg string, rec *kgo.Record, attrs ...any) {
	r.log(slog.LevelWarn, msg, rec, attrs)
}
func (r *recordLog) error(msg string, rec *kgo.Record, attrs ...any) {
	r.log(slog.LevelError, msg, rec, attrs)
}
func (r *recordLog) info(msg string, rec *kgo.Record, attrs ...any) {
	r.log(slog.LevelInfo, msg, rec, attrs)
}

func (r *recordLog) log(level slog.Level, msg string, rec *kgo.Record, attrs []any) {
	ctx := context.Background()
	if !r.l.Enabled(ctx, level) {
		return
	}
	r.mu.Lock()
	now := time.Now()
	r.rollLocked(now)
	if r.lines >= logBurst {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	r.lines++
	r.mu.Unlock()
	r.l.Log(ctx, level, msg, append(recordAttrs(rec), attrs...)...)
}

// idle logs, as the partition goes idle, how many record-level lines were
// suppressed, if any: once per window; what is suppressed after that is
// told at the first line or idle moment after the window ended.
func (r *recordLog) idle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rollLocked(time.Now()) {
		return
	}
	if !r.told {
		r.told = r.summaryLocked()
	}
}

// rollLocked starts a new window when the current one ended, after a
// summary of what it suppressed, and reports whether it did.
func (r *recordLog) rollLocked(now time.Time) bool {
	if now.Sub(r.start) < logWindow {
		return false
	}
	r.summaryLocked()
	r.start, r.lines, r.told = now, 0, false
	return true
}

// summary logs how many record-level lines were suppressed, if any: when
// the partition stops.
func (r *recordLog) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.summaryLocked()
}

// summaryLocked logs the suppressed lines not summarized yet, and reports
// whether there were any.
func (r *recordLog) summaryLocked() bool {
	if r.suppressed == 0 {
		return false
	}
	r.l.Warn("record-level log lines suppressed (every record is still counted in Stats)",
		"topic", r.topic, "partition", r.part, "suppressed", r.suppressed,
		"window", dur(logWindow), "limit", logBurst)
	r.suppressed = 0
	return true
}
