package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

const token = "console-test-token"

// chromium returns the browser's path, skipping t without one (failing it
// with CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	paths := []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}
	if p := os.Getenv("ANTIDOTE_CHROMIUM"); p != "" {
		paths = []string{p}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and no Chromium at %v (scripts/test.sh installs Debian's chromium)", paths)
	}
	t.Skipf("no Chromium at %v: apt-get install chromium", paths)
	return ""
}

// tab is a headless browser tab and what it saw.
type tab struct {
	ctx     context.Context
	dialogs atomic.Int32
	base    string
}

// newTab starts a headless Chromium for t, closed when t ends, and a
// server on loopback serving h, whose console is under path ("" for /).
func newTab(t *testing.T, h http.Handler, path string) *tab {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return browse(t, srv.URL+path)
}

// browse starts a headless Chromium for t, closed when t ends, with a
// profile of its own (no cookie shared with another tab), for the console
// at base; extra adds flags.
func browse(t *testing.T, base string, extra ...chromedp.ExecAllocatorOption) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the test may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("lang", "en-US"),
	)
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	tb := &tab{ctx: ctx, base: base}
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			tb.dialogs.Add(1)
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return tb
}

func (tb *tab) run(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(tb.ctx, actions...); err != nil {
		var loc string
		_ = chromedp.Run(tb.ctx, chromedp.Location(&loc))
		var body string
		_ = chromedp.Run(tb.ctx, chromedp.Text("body", &body, chromedp.ByQuery))
		t.Fatalf("%s: %v (at %s; page text %q)", what, err, loc, clip(body, 2000))
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// login opens the console, is sent to the login page, and logs in.
func (tb *tab) login(t *testing.T) {
	t.Helper()
	tb.run(t, "login",
		chromedp.Navigate(tb.base+"/"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", token, chromedp.ByID),
		chromedp.Click("#login", chromedp.ByID),
		chromedp.WaitVisible("#topics", chromedp.ByID),
	)
}

// text returns the text of the element sel, once the page has loaded.
// It is read in one evaluation in the page: a node found by one CDP call
// and read by the next can belong to a document that a form's redirect has
// replaced in between ("No node with given id found").
func (tb *tab) text(t *testing.T, sel string) string {
	t.Helper()
	js := `(() => { if (document.readyState !== "complete") return null;
		const e = document.querySelector(` + strconv.Quote(sel) + `);
		return e ? [e.innerText] : null; })()`
	var s []string
	tb.run(t, "text of "+sel, chromedp.Poll(js, &s, chromedp.WithPollingTimeout(30*time.Second)))
	if len(s) != 1 {
		t.Fatalf("text of %s: %v", sel, s)
	}
	return s[0]
}

// screenshot writes the page to $ANTIDOTE_SCREENSHOTS/name.png.
func (tb *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("ANTIDOTE_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	tb.run(t, "screenshot "+name, chromedp.CaptureScreenshot(&png))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s.png (%d bytes)", name, len(png))
}

func contains(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%s: %q does not contain %q", what, clip(s, 1500), sub)
	}
}
