package consumer

import (
	"testing"

	"github.com/antidote-kafka/antidote/deadletter"
)

// TestOwnTopics: every name the dead-letter template can give is the
// consumer's own, whatever the source topic, and so is the attempts topic;
// a pattern's text cannot escape its anchors.
func TestOwnTopics(t *testing.T) {
	for _, tc := range []struct {
		tmpl      deadletter.Template
		own, free []string
	}{
		{"", []string{"orders.dlq", "gone-long-ago.dlq", "g.antidote-attempts"}, []string{"orders", "orders.dlq2", ".dlq"}},
		{"dlq.{topic}", []string{"dlq.orders", "dlq.x"}, []string{"orders.dlq", "dlq."}},
		{"{group}.dead", []string{"g.dead"}, []string{"orders.dead"}},
	} {
		own := ownTopics(tc.tmpl, "g", "g.antidote-attempts")
		for _, n := range tc.own {
			if !own(n) {
				t.Errorf("template %q: %s is not own", tc.tmpl, n)
			}
		}
		for _, n := range tc.free {
			if own(n) {
				t.Errorf("template %q: %s is own", tc.tmpl, n)
			}
		}
	}
	if _, err := compileTopicPattern("a)|(?:b"); err == nil {
		t.Error(`"a)|(?:b" compiled: it escapes the anchors`)
	}
	re, _ := compileTopicPattern("orders|payments")
	if re.MatchString("orders-x") || !re.MatchString("payments") {
		t.Error("the pattern is not anchored to the whole name")
	}
}
