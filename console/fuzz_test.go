package console

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzVisible: Visible never panics, returns valid UTF-8 without control
// or bidirectional characters (but newline and tab), and cuts at the limit.
func FuzzVisible(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred\x1b[0m", "\xff\xfe", "a\u202eb", "é", "\xc3", "<script>", "\\x41", strings.Repeat("ü", 40)} {
		f.Add([]byte(s), 7)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		limit = limit % 64
		if limit < 0 {
			limit = -limit
		}
		s, cut := Visible(b, limit)
		if !utf8.ValidString(s) {
			t.Fatalf("Visible(%q) = %q: not UTF-8", b, s)
		}
		for _, r := range s {
			if r != '\n' && r != '\t' && !unicode.IsPrint(r) && r != ' ' {
				t.Fatalf("Visible(%q) = %q holds %U", b, s, r)
			}
		}
		if cut != (limit > 0 && len(b) > limit) {
			t.Fatalf("Visible(%q, %d): cut %v", b, limit, cut)
		}
		if limit == 0 && !cut {
			// Without a cut, the escapes say every byte.
			if strings.Contains(string(b), "\x1b") && !strings.Contains(s, `\x1b`) {
				t.Fatalf("Visible(%q) = %q lost the ESC", b, s)
			}
		}
	})
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[31mred":    `\x1b[31mred`,
		"a\xffb":         `a\xffb`,
		"rtl\u202eevil":  `rtl\u202eevil`,
		"back\\slash":    `back\slash`,
		"line\nnext\tok": "line\nnext\tok",
		"<b>markup</b>":  "<b>markup</b>", // html/template escapes it
	} {
		if got, _ := Visible([]byte(in), 0); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got, cut := Visible([]byte("héllo"), 2); got != "h" || !cut {
		t.Errorf("cut inside a rune: %q %v", got, cut)
	}
}

// FuzzCursor: a page cursor from a link never panics, and one that reads
// prints back as itself.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"0-0", "3-17", "-1-5", "1-", "x", "2147483648-0", "1-9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseCursor(s)
		if !ok {
			return
		}
		if c.Partition < 0 || c.Offset < 0 {
			t.Fatalf("parseCursor(%q) = %+v", s, c)
		}
		if again, ok := parseCursor(c.String()); !ok || again != c {
			t.Fatalf("%q: %+v prints as %q, which reads as %+v", s, c, c.String(), again)
		}
	})
}
