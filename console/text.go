package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/antidote-kafka/antidote/deadletter"
)

// Visible returns b as text that shows what it holds and cannot steer a
// terminal or a page: printable UTF-8 as it is (with newlines and tabs),
// every other byte or rune as a Go escape (\x1b for ESC, \xff for a byte
// that is not UTF-8, \u202e for a bidirectional override). A backslash
// stays as it is, so that error messages read as written. It shows at most
// limit bytes of b (0: all) and reports whether it cut. The result still
// needs HTML escaping, which html/template does.
func Visible(b []byte, limit int) (text string, cut bool) {
	if limit > 0 && len(b) > limit {
		b, cut = b[:limit], true
		// Do not split a rune: back up to its start.
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[len(b)-1]); i++ {
			b = b[:len(b)-1]
		}
		if len(b) > 0 && utf8.RuneStart(b[len(b)-1]) && !utf8.FullRune(b[len(b)-1:]) {
			b = b[:len(b)-1]
		}
	}
	var s strings.Builder
	s.Grow(len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&s, `\x%02x`, b[0])
		case r == '\n' || r == '\t':
			s.WriteRune(r)
		case unicode.IsPrint(r) || r == ' ':
			s.Write(b[:n])
		case r < 0x80:
			fmt.Fprintf(&s, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&s, `\u%04x`, r)
		default:
			fmt.Fprintf(&s, `\U%08x`, r)
		}
		b = b[n:]
	}
	return s.String(), cut
}

// visible is Visible without a limit, for one-line strings (a header value
// cut to a line).
func visible(s string) string {
	t, _ := Visible([]byte(s), 0)
	return t
}

// clip shortens s to n runes, with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// printable reports whether b is UTF-8 text without control characters
// other than white space.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// digest is the size and SHA-256 of a hidden key, value or header value.
func digest(b []byte) string {
	if b == nil {
		return "null"
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("hidden: %d bytes, sha256 %s", len(b), hex.EncodeToString(sum[:]))
}

// blob is a key or a value as the letter page shows it.
type blob struct {
	Name  string // key or value
	Size  int
	Null  bool
	Views []view // the forms it can be shown in
	As    string // the form shown
	Text  string // the form's text
	Cut   bool   // Text is cut: "show all"
	Note  string
}

type view struct {
	Name, Label string
	On          bool
}

// showBytes renders b in the form as: auto, text, json, hex or decoded.
func showBytes(name string, b []byte, as string, limit int, hidden bool, decoded string, decodeErr error) blob {
	bl := blob{Name: name, Size: len(b), Null: b == nil}
	if hidden {
		bl.As, bl.Text = "hidden", digest(b)
		return bl
	}
	if b == nil {
		bl.As = "null"
		return bl
	}
	isText := printable(b)
	isJSON := utf8.Valid(b) && len(bytes.TrimSpace(b)) > 0 && json.Valid(b)
	forms := []string{"text", "json", "hex"}
	if decoded != "" || decodeErr != nil {
		forms = append([]string{"decoded"}, forms...)
	}
	if as == "" || as == "auto" {
		switch {
		case decoded != "":
			as = "decoded"
		case isJSON:
			as = "json"
		case isText:
			as = "text"
		default:
			as = "hex"
		}
	}
	if as == "json" && !isJSON {
		as, bl.Note = "text", "not valid JSON: shown as text"
	}
	if as == "decoded" && decoded == "" {
		as = "hex"
		if decodeErr != nil {
			bl.Note = "not decoded: " + decodeErr.Error()
		}
	}
	if !slices.Contains(forms, as) {
		as = "hex"
	}
	for _, f := range forms {
		bl.Views = append(bl.Views, view{Name: f, Label: f, On: f == as})
	}
	bl.As = as
	switch as {
	case "text":
		bl.Text, bl.Cut = Visible(b, limit)
		if !isText {
			bl.Note = "not printable UTF-8: other bytes are shown as escapes"
		}
	case "json":
		var buf bytes.Buffer
		src := b
		if limit > 0 && len(b) > limit {
			// Indenting a cut document fails: show it as text.
			bl.Text, bl.Cut = Visible(b, limit)
			break
		}
		if json.Indent(&buf, src, "", "  ") == nil {
			bl.Text, _ = Visible(buf.Bytes(), 0)
		} else {
			bl.Text, bl.Cut = Visible(b, limit)
		}
	case "decoded":
		var buf bytes.Buffer
		d := []byte(decoded)
		if json.Valid(d) && json.Indent(&buf, d, "", "  ") == nil {
			d = buf.Bytes()
		}
		bl.Text, bl.Cut = Visible(d, limit)
	case "hex":
		hb := b
		hl := limit / 4 // a hex dump is about four times longer
		if hl > 0 && len(hb) > hl {
			hb, bl.Cut = hb[:hl], true
		}
		bl.Text = strings.TrimRight(hex.Dump(hb), "\n")
	}
	return bl
}

// headerValue is one header value for the letter page.
func headerValue(h deadletter.Header, limit int) (string, bool) {
	switch {
	case h.Value == nil:
		return "(null)", false
	case len(h.Value) == 0:
		return `""`, false
	case printable(h.Value):
		return Visible(h.Value, limit)
	}
	hb, cut := h.Value, false
	if len(hb) > limit/2 {
		hb, cut = hb[:limit/2], true
	}
	return "0x" + hex.EncodeToString(hb), cut
}

// age is a short duration since t: 45s, 12m, 3h, 9d.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in the future"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
