package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	buttonRE = regexp.MustCompile(`<button[^>]*>`)
	idRE     = regexp.MustCompile(`\bid="([^"]+)"`)
	classRE  = regexp.MustCompile(`\bclass="([^"]+)"`)
	actionRE = regexp.MustCompile(`{{[^}]*}}`) // {{if .X}}a{{else}}b{{end}}: a and b
)

// TestEveryButtonPressed: every button of the console's templates has an
// id or a class, and a browser test of this package clicks it (by the id,
// or by one of the classes: a button whose class a template chooses, such
// as Pause or Resume, is found by each).
func TestEveryButtonPressed(t *testing.T) {
	pages, err := filepath.Glob("../assets/templates/*.html")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range tests {
		if f == "buttons_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	clicks := src.String()
	n := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range buttonRE.FindAllString(string(b), -1) {
			n++
			var sels []string
			all := false // every selector (the template chooses one), or any
			if m := idRE.FindStringSubmatch(tag); m != nil {
				sels = append(sels, `Click("#`+m[1]+`"`)
			} else if m := classRE.FindStringSubmatch(tag); m != nil {
				all = actionRE.MatchString(m[1])
				for _, c := range strings.Fields(actionRE.ReplaceAllString(m[1], " ")) {
					sels = append(sels, `button.`+c+`"`)
				}
			}
			if len(sels) == 0 {
				t.Errorf("%s: %s has neither an id nor a class to click it by", filepath.Base(page), tag)
				continue
			}
			pressed := slices.ContainsFunc(sels, func(sel string) bool { return strings.Contains(clicks, sel) })
			if all {
				pressed = !slices.ContainsFunc(sels, func(sel string) bool { return !strings.Contains(clicks, sel) })
			}
			if !pressed {
				t.Errorf("%s: no browser test presses %s (looked for %q)", filepath.Base(page), tag, sels)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d buttons in the templates; the pattern no longer matches them", n)
	}
}
