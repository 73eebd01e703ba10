package console

import (
	"fmt"
	"html/template"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

var pageNames = []string{"login", "error", "topics", "topic", "letter", "dryrun", "job", "purge", "consumer", "audit", "signedin"}

// parsePages parses the layout with each page.
func parsePages(h *Handler) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"mul100": func(f float64) float64 { return 100 * f },
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(deadletter.TimeLayout)
		},
		"since": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return age(time.Now(), t)
		},
		"add": func(a, b int) int { return a + b },
		"pct": func(a, b int) string {
			if b == 0 {
				return "0%"
			}
			return fmt.Sprintf("%d%%", a*100/b)
		},
	}
	base, err := template.New("layout").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(assets, "assets/templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}
