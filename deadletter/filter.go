package deadletter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Filter selects dead letters. The zero Filter selects every letter; each
// set field narrows the selection, and a letter must match all of them.
type Filter struct {
	// OriginalTopic: the letter's original topic, exactly.
	OriginalTopic string
	// Stage: the letter's stage, ignoring case.
	Stage string
	// Class: the letter's failure class, ignoring case.
	Class string
	// Reason: text found, ignoring case, in the letter's reason, error
	// type, cause type or message, or in the last "Caused by" of its
	// stack trace (Spring's message for a deserialization failure says
	// only "failed to deserialize"; the cause says why).
	Reason string
	// Since and Until bound the dead-letter record's timestamp: Since is
	// inclusive, Until exclusive. The zero time leaves a side open.
	Since, Until time.Time
	// MaxAge and MinAge bound the timestamp relative to now: at most
	// MaxAge old ("--since 7d"), at least MinAge old. Zero leaves a side
	// open. Relative bounds keep their meaning when a filter is stored
	// or run again (see [Filter.Canonical]); [Filter.At] resolves them.
	MaxAge, MinAge time.Duration
}

// IsZero reports whether f selects every letter.
func (f Filter) IsZero() bool { return f == Filter{} }

// At returns f with MaxAge and MinAge resolved against now into Since
// and Until (the narrower bound wins), so that a long scan uses one
// "now" throughout.
func (f Filter) At(now time.Time) Filter {
	if f.MaxAge > 0 {
		if s := now.Add(-f.MaxAge); f.Since.IsZero() || s.After(f.Since) {
			f.Since = s
		}
	}
	if f.MinAge > 0 {
		if u := now.Add(-f.MinAge); f.Until.IsZero() || u.Before(f.Until) {
			f.Until = u
		}
	}
	f.MaxAge, f.MinAge = 0, 0
	return f
}

// Canonical is f as text, the same for equal selections however they were
// written: case-folded stage and class, absolute times in UTC, relative
// bounds as durations (so "--since 7d" today and tomorrow give the same
// text). [RedriveConfig.DefaultGroup] hashes it.
func (f Filter) Canonical() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	add("original-topic", f.OriginalTopic)
	add("stage", strings.ToLower(f.Stage))
	add("class", strings.ToLower(f.Class))
	add("reason", strings.ToLower(f.Reason))
	if !f.Since.IsZero() {
		add("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		add("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.MaxAge > 0 {
		add("max-age", f.MaxAge.String())
	}
	if f.MinAge > 0 {
		add("min-age", f.MinAge.String())
	}
	return strings.Join(parts, " ")
}

// Match reports whether l is selected by f. Relative bounds are taken
// against the current time; resolve them once with [Filter.At] for a
// scan.
func (f Filter) Match(l *Letter) bool {
	if f.MaxAge > 0 || f.MinAge > 0 {
		f = f.At(time.Now())
	}
	if f.OriginalTopic != "" && l.OriginalTopic != f.OriginalTopic {
		return false
	}
	if f.Stage != "" && !strings.EqualFold(l.Stage, f.Stage) {
		return false
	}
	if f.Class != "" && !strings.EqualFold(l.Class, f.Class) {
		return false
	}
	if f.Reason != "" && !matchReason(l, f.Reason) {
		return false
	}
	ts := l.Record.Timestamp
	if !f.Since.IsZero() && ts.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !ts.Before(f.Until) {
		return false
	}
	return true
}

func matchReason(l *Letter, reason string) bool {
	for _, s := range []string{l.Reason, l.ErrorType, l.CauseType, l.Message, l.RootCause()} {
		if containsFold(s, reason) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub, ignoring case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// Selects reports whether f selects l as the dead-letter readers do (the
// dlq commands, the console, [Redrive]): the zero Filter selects every
// record, readable or not; any other selects only letters of a known
// dialect that it matches.
func (f Filter) Selects(l *Letter) bool {
	return f.IsZero() || (l.Dialect != DialectUnknown && f.Match(l))
}

// ParseWhen reads a time bound as the dlq commands and the console take
// it: an RFC 3339 time (at), or a duration before now (ago) such as
// "90m", "2h" or "7d", which fits [Filter.MaxAge] and [Filter.MinAge].
// The empty string is no bound.
func ParseWhen(s string) (at time.Time, ago time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, 0, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n > 0 && n < 1e5 {
			return time.Time{}, time.Duration(n * 24 * float64(time.Hour)), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return time.Time{}, d, nil
	}
	return time.Time{}, 0, fmt.Errorf("%q: want an RFC 3339 time (2026-03-14T15:00:00Z) or a duration ago (90m, 2h, 7d)", Truncate(s, 64))
}
