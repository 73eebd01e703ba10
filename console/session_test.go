package console_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
)

// browser is a client of a console on loopback that keeps no cookie by
// itself: the test says which session each request carries.
type browser struct {
	t    *testing.T
	base string
	cl   *http.Client
}

// loopbackConsole serves a console over a fake consumer (no Kafka is
// reached) under prefix.
func loopbackConsole(t *testing.T, prefix string) *browser {
	t.Helper()
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token, Prefix: prefix,
		Logger:    slog.New(slog.DiscardHandler),
		Consumers: map[string]admin.Consumer{"orders": &fakeConsumer{stats: consumer.Stats{Running: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &browser{t: t, base: srv.URL, cl: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values, session *http.Cookie, edit func(*http.Request)) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if session != nil {
		req.AddCookie(session)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := b.cl.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// login logs in with next and returns the session cookie and where the
// console sent the browser.
func (b *browser) login(next string) (*http.Cookie, string) {
	b.t.Helper()
	resp, body := b.do("POST", "/ui/login", url.Values{"token": {token}, "next": {next}}, nil, nil)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "antidote_console" {
			return c, resp.Header.Get("Location")
		}
	}
	b.t.Fatal("login set no session cookie")
	return nil, ""
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func (b *browser) csrf(session *http.Cookie) string {
	b.t.Helper()
	resp, body := b.do("GET", "/ui/consumers/orders", nil, session, nil)
	m := csrfRE.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		b.t.Fatalf("consumer page: %d, no CSRF token", resp.StatusCode)
	}
	return m[1]
}

// TestLoginRedirect: after the login, the console sends the browser only
// to a path of its own; the rest goes to the console's first page.
func TestLoginRedirect(t *testing.T) {
	b := loopbackConsole(t, "/ui/")
	for next, want := range map[string]string{
		"/ui/topics/orders.dlq?stage=process": "/ui/topics/orders.dlq?stage=process",
		"/ui/":                                "/ui/",
		"/ui/\t/evil.example":                 "/ui/",
		"/\t/evil.example":                    "/ui/",
		"/ui/%09/evil.example":                "/ui/%09/evil.example", // percent-encoded: a path of the console
		"//evil.example":                      "/ui/",
		"//evil.example/ui/":                  "/ui/",
		"/ui//evil.example":                   "/ui/",
		"/ui/../evil":                         "/ui/",
		"/ui/./x":                             "/ui/",
		"https://evil.example/ui/":            "/ui/",
		"/ui/\\evil.example":                  "/ui/",
		"/ui/\r\nSet-Cookie: x":               "/ui/",
		"/ui/\x00":                            "/ui/",
		"/ui/é":                               "/ui/",
		"/other/":                             "/ui/",
		"":                                    "/ui/",
	} {
		if _, got := b.login(next); got != want {
			t.Errorf("login with next %q sends to %q, want %q", next, got, want)
		}
	}
	// The query parameter as a browser sends it: next=/%09/evil.example
	// is "/<TAB>/evil.example" once decoded.
	resp, body := b.do("GET", "/ui/login?next=/%09/evil.example", nil, nil, nil)
	if resp.StatusCode != 200 || strings.Contains(body, "evil.example") {
		t.Errorf("login page of next=/%%09/evil.example: %d, and the page carries it on: %v", resp.StatusCode, strings.Contains(body, "evil.example"))
	}
}

// TestSessions: each login is a session of its own; the CSRF token of one
// session does not act for another; after logout the session's cookie
// (a copy kept anywhere) neither shows a page nor acts.
func TestSessions(t *testing.T) {
	b := loopbackConsole(t, "/ui/")
	s1, _ := b.login("/ui/")
	s2, _ := b.login("/ui/")
	if s1.Value == s2.Value {
		t.Fatal("two logins got the same session cookie")
	}
	c1, c2 := b.csrf(s1), b.csrf(s2)
	if c1 == c2 {
		t.Fatal("two sessions share their CSRF token")
	}
	retryOff := func(session *http.Cookie, csrf string) int {
		resp, _ := b.do("POST", "/ui/consumers/orders/retry", url.Values{"csrf": {csrf}, "enabled": {"off"}}, session, nil)
		return resp.StatusCode
	}
	if code := retryOff(s1, c2); code != http.StatusForbidden {
		t.Errorf("session 1 with the CSRF token of session 2: %d, want 403", code)
	}
	if code := retryOff(s1, c1); code != http.StatusSeeOther {
		t.Errorf("session 1 with its CSRF token: %d, want 303", code)
	}
	if resp, _ := b.do("POST", "/ui/logout", url.Values{"csrf": {c1}}, s1, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := b.do("GET", "/ui/consumers/orders", nil, s1, nil); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "/ui/login") {
		t.Errorf("a page with the cookie of before the logout: %d to %q, want the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code := retryOff(s1, c1); code != http.StatusUnauthorized {
		t.Errorf("an action with the cookie and CSRF token of before the logout: %d, want 401", code)
	}
	// The other session lives on.
	if code := retryOff(s2, c2); code != http.StatusSeeOther {
		t.Errorf("session 2 after session 1 logged out: %d, want 303", code)
	}
	// A cookie the server never gave.
	if resp, _ := b.do("GET", "/ui/consumers/orders", nil, &http.Cookie{Name: "antidote_console", Value: strings.Repeat("ab", 32)}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a made-up session cookie: %d, want 303 to the login page", resp.StatusCode)
	}
	// Behind a proxy that terminates TLS, the cookie is Secure.
	resp, _ := b.do("POST", "/ui/login", url.Values{"token": {token}}, nil, func(r *http.Request) { r.Header.Set("X-Forwarded-Proto", "https") })
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("login behind a TLS proxy: cookies %v, want one Secure", cs)
	}
}

// TestConsoleForeignHost: on a loopback listener, a request whose Host is
// another site's name (DNS rebinding) is answered 421, the login page too.
func TestConsoleForeignHost(t *testing.T) {
	b := loopbackConsole(t, "/ui/")
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example"} {
		for _, path := range []string{"/ui/login", "/ui/", "/ui/static/app.js"} {
			resp, _ := b.do("GET", path, nil, nil, func(r *http.Request) { r.Host = host })
			if resp.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: %d, want 421", path, host, resp.StatusCode)
			}
		}
	}
	if resp, _ := b.do("GET", "/ui/login", nil, nil, func(r *http.Request) { r.Host = "localhost" }); resp.StatusCode != 200 {
		t.Errorf("Host localhost: %d, want 200", resp.StatusCode)
	}
}

// TestLoginThrottle: after a burst of wrong tokens, logins are refused
// with 429 and Retry-After, the right token too, so that guessing is slow.
func TestLoginThrottle(t *testing.T) {
	b := loopbackConsole(t, "/ui/")
	for i := range 10 {
		if resp, _ := b.do("POST", "/ui/login", url.Values{"token": {"guess"}}, nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, resp.StatusCode)
		}
	}
	for _, tok := range []string{"guess", token} {
		resp, body := b.do("POST", "/ui/login", url.Values{"token": {tok}}, nil, nil)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || len(resp.Cookies()) != 0 {
			t.Errorf("login with %q after 10 wrong tokens: %d, Retry-After %q, cookies %v; want 429 and no session", tok, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Cookies())
		}
		if !strings.Contains(body, "too many wrong tokens") {
			t.Errorf("the 429 page does not say why")
		}
	}
}
