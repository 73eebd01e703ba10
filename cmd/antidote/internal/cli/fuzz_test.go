package cli

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
		out := Safe(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Safe(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("Safe(%q) = %q: holds %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) < 0
		if clean && out != s {
			t.Fatalf("Safe(%q) = %q: changed clean text", s, out)
		}
		_ = Clip(out, 10)
	})
}
