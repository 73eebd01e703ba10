package dlq

import (
	"testing"
)

// FuzzFlagValues: the parsers of --offset and --since/--until never panic
// and accept only what they promise.
func FuzzFlagValues(f *testing.F) {
	for _, s := range []string{"", "100", "100-199", "-5", "5-", "9-3", "7d", "90m", "2026-03-14T15:00:00Z", "1e9d", "0x10", "99999999999999999999-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if from, to, err := parseOffsets(s); err == nil && (from < 0 || (to >= 0 && to < from)) {
			t.Fatalf("parseOffsets(%q) = %d, %d", s, from, to)
		}
		if at, ago, err := parseWhen("since", s); err == nil && ago < 0 {
			t.Fatalf("parseWhen(%q) = %v, %v", s, at, ago)
		}
	})
}
