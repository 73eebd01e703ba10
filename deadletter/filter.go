package deadletter

import (
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
	// type, cause type or message.
	Reason string
	// Since and Until bound the dead-letter record's timestamp: Since is
	// inclusive, Until exclusive. The zero time leaves a side open.
	Since, Until time.Time
}

// IsZero reports whether f selects every letter.
func (f Filter) IsZero() bool { return f == Filter{} }

// Match reports whether l is selected by f.
func (f Filter) Match(l *Letter) bool {
	if f.OriginalTopic != "" && l.OriginalTopic != f.OriginalTopic {
		return false
	}
	if f.Stage != "" && !strings.EqualFold(l.Stage, f.Stage) {
		return false
	}
	if f.Class != "" && !strings.EqualFold(l.Class, f.Class) {
		return false
	}
	if f.Reason != "" {
		want := strings.ToLower(f.Reason)
		found := false
		for _, s := range []string{l.Reason, l.ErrorType, l.CauseType, l.Message} {
			if strings.Contains(strings.ToLower(s), want) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
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
