package console_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/console"
)

// TestIntegrationSecurity: the login page guards every page; the cookie is
// HttpOnly and SameSite=Strict; an action needs the CSRF token and a POST;
// the CSP forbids inline scripts.
func TestIntegrationSecurity(t *testing.T) {
	c, dlq := letters(t, 3)
	base := newServer(t, c, console.Config{})
	code, _, hd := get(t, base+"/topics/"+dlq, false)
	if code != http.StatusSeeOther || !strings.HasPrefix(hd.Get("Location"), "/login?next=") {
		t.Fatalf("without a session: %d to %q, want 303 to the login page", code, hd.Get("Location"))
	}
	if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.PostForm(base+"/login", url.Values{"token": {"wrong"}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, err = cl.PostForm(base+"/login", url.Values{"token": {token}, "next": {"//evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d to %q, want 303 to / (never off the console)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "antidote_console" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict", session)
	}
	do := func(method, path string, form url.Values) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(session)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do("GET", "/topics/"+dlq, nil)
	if code != 200 {
		t.Fatalf("with the cookie: %d", code)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if csrf == nil {
		t.Fatal("no CSRF token in the page")
	}
	form := url.Values{"scope": {"filter"}, "action": {"dry-run"}}
	if code, _ := do("POST", "/topics/"+dlq+"/redrive", form); code != http.StatusForbidden {
		t.Errorf("POST without the CSRF token: %d, want 403", code)
	}
	wrong := "0" + csrf[1][1:]
	if csrf[1][0] == '0' {
		wrong = "1" + csrf[1][1:]
	}
	form.Set("csrf", wrong)
	if code, _ := do("POST", "/topics/"+dlq+"/redrive", form); code != http.StatusForbidden {
		t.Errorf("POST with a wrong CSRF token: %d, want 403", code)
	}
	if code, _ := do("GET", "/topics/"+dlq+"/redrive?"+form.Encode(), nil); code != http.StatusMethodNotAllowed && code != http.StatusNotFound {
		t.Errorf("GET of an action: %d, want 405 or 404", code)
	}
	form.Set("csrf", csrf[1])
	if code, body := do("POST", "/topics/"+dlq+"/redrive", form); code != 200 || !strings.Contains(body, `id="would">3<`) {
		t.Errorf("dry run with the CSRF token: %d %s", code, body)
	}
}
