package deadletter

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// DefaultTemplate names the dead-letter topic of topic T "T.dlq".
const DefaultTemplate = "{topic}.dlq"

// Template names dead-letter topics. It may use the placeholders {topic} (the
// source topic) and {group} (the consumer group). The zero value is
// [DefaultTemplate].
type Template string

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// legalTopic is Kafka's rule for topic names.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ErrBadTemplate is returned by [Template.Validate].
var ErrBadTemplate = errors.New("deadletter: bad topic template")

// Validate reports whether t uses only known placeholders and yields legal
// Kafka topic names.
func (t Template) Validate() error {
	s := string(t)
	if s == "" {
		return nil
	}
	for _, p := range placeholder.FindAllString(s, -1) {
		if p != "{topic}" && p != "{group}" {
			return fmt.Errorf("%w %q: unknown placeholder %s (known: {topic}, {group})", ErrBadTemplate, s, p)
		}
	}
	probe := t.Name("orders", "group")
	if !legalTopic.MatchString(probe) || probe == "." || probe == ".." {
		return fmt.Errorf("%w %q: yields %q, not a legal topic name (letters, digits, '.', '_', '-'; at most 249)", ErrBadTemplate, s, probe)
	}
	return nil
}

// Name returns the dead-letter topic for topic and group.
func (t Template) Name(topic, group string) string {
	s := string(t)
	if s == "" {
		s = DefaultTemplate
	}
	return strings.NewReplacer("{topic}", topic, "{group}", group).Replace(s)
}
