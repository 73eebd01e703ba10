package main

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzSafe: what the tables print of a record's hostile bytes is valid
// UTF-8 without control characters (no escape sequence reaches the
// terminal), and clean text stays as it is.
func FuzzSafe(f *testing.F) {
	for _, s := range []string{"", "plain text", "\x1b[31mred\x1b[0m", "a\nb\tc\r", "\xff\xfe", "\u202eevil", "é ü 日本", "\x00", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := safe(s)
		if !utf8.ValidString(out) {
			t.Fatalf("safe(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("safe(%q) = %q: holds %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) < 0
		if clean && out != s {
			t.Fatalf("safe(%q) = %q: changed clean text", s, out)
		}
		_ = clip(out, 10)
	})
}

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
