package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
)

// fakeLogin is a console.Login whose users are codes: "viewer" and
// "operator" log in with that role, "nobody" has none. It checks that the
// verifier and nonce of the exchange are those of the login it started.
type fakeLogin struct {
	mu     sync.Mutex
	issued map[string][2]string // state -> verifier, nonce
	byCode map[string]string    // code -> state
}

func (f *fakeLogin) Label() string { return "Log in with the test provider" }

func (f *fakeLogin) AuthURL(_ context.Context, redirect, state, nonce, verifier string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.issued == nil {
		f.issued, f.byCode = map[string][2]string{}, map[string]string{}
	}
	f.issued[state] = [2]string{verifier, nonce}
	return "https://idp.example/auth?" + url.Values{"state": {state}, "redirect_uri": {redirect}}.Encode(), nil
}

// grant is the provider's side: the user logs in, and the provider hands
// the browser a code for state.
func (f *fakeLogin) grant(user, state string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	code := fmt.Sprintf("%s-%d", user, len(f.byCode))
	f.byCode[code] = state
	return code
}

func (f *fakeLogin) Exchange(_ context.Context, _, code, verifier, nonce string) (console.Identity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.byCode[code]
	if !ok || f.issued[st] != [2]string{verifier, nonce} {
		return console.Identity{}, errors.New("wrong code, verifier or nonce")
	}
	user, _, _ := strings.Cut(code, "-")
	switch user {
	case "viewer":
		return console.Identity{Subject: "v1", Name: "viewer@example.com", Role: console.RoleViewer}, nil
	case "operator":
		return console.Identity{Subject: "o1", Name: "operator@example.com", Role: console.RoleOperator}, nil
	}
	return console.Identity{}, fmt.Errorf("%s@example.com: %w", user, console.ErrNoRole)
}

// loginVia logs user in through the provider and returns the session
// cookie; status is the callback's.
func (b *browser) loginVia(f *fakeLogin, user string) (*http.Cookie, int, string) {
	b.t.Helper()
	resp, body := b.do("GET", "/ui/login/start?next=%2Fui%2Fconsumers%2Forders", nil, nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "https://idp.example/auth?") {
		b.t.Fatalf("login/start: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	u, _ := url.Parse(resp.Header.Get("Location"))
	state := u.Query().Get("state")
	if ru := u.Query().Get("redirect_uri"); ru != b.base+"/ui/login/callback" {
		b.t.Errorf("redirect_uri %q", ru)
	}
	var bind *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "antidote_login" {
			bind = c
		}
	}
	if bind == nil || bind.Value != state || !bind.HttpOnly || bind.SameSite != http.SameSiteLaxMode {
		b.t.Fatalf("the login's cookie %+v does not bind state %q", bind, state)
	}
	cb := "/ui/login/callback?" + url.Values{"state": {state}, "code": {f.grant(user, state)}}.Encode()
	resp, body = b.do("GET", cb, nil, bind, nil)
	for _, c := range resp.Cookies() {
		if c.Name == "antidote_console" && c.Value != "" {
			return c, resp.StatusCode, body
		}
	}
	return nil, resp.StatusCode, body
}

func rolesConsole(t *testing.T) (*browser, *fakeLogin, *fakeConsumer, *console.Handler) {
	t.Helper()
	f := &fakeLogin{}
	fc := &fakeConsumer{stats: consumer.Stats{Running: true, Partitions: []consumer.Partition{{Topic: "orders", Partition: 0, State: consumer.PartitionFlowing}}}}
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token, Prefix: "/ui/",
		Logger: slog.New(slog.DiscardHandler), Login: f, AuditSize: 3,
		Consumers: map[string]admin.Consumer{"orders": fc},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &browser{t: t, base: srv.URL, cl: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, f, fc, h
}

// TestLoginProvider: the login through the provider needs the state this
// browser started, once; the session carries who and the role; a user
// with no role is refused with what to do.
func TestLoginProvider(t *testing.T) {
	b, f, _, _ := rolesConsole(t)
	if resp, body := b.do("GET", "/ui/login", nil, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, "Log in with the test provider") || !strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d, want both ways to log in: %s", resp.StatusCode, body)
	}
	session, code, body := b.loginVia(f, "viewer")
	if code != 200 || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || !strings.Contains(body, `id="continue" href="/ui/consumers/orders"`) {
		t.Fatalf("callback: %d, session %+v: %s", code, session, body)
	}
	if resp, body := b.do("GET", "/ui/", nil, session, nil); resp.StatusCode != 200 || !strings.Contains(body, "viewer@example.com (viewer)") {
		t.Errorf("the session does not name the viewer: %d", resp.StatusCode)
	}

	// A state this browser did not start (login CSRF), or one used twice.
	resp, _ := b.do("GET", "/ui/login/start?next=/ui/", nil, nil, nil)
	u, _ := url.Parse(resp.Header.Get("Location"))
	state := u.Query().Get("state")
	cb := "/ui/login/callback?" + url.Values{"state": {state}, "code": {f.grant("operator", state)}}.Encode()
	if resp, body := b.do("GET", cb, nil, nil, nil); resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) > 1 || !strings.Contains(body, "log in again") {
		t.Errorf("callback without the login's cookie: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	bind := &http.Cookie{Name: "antidote_login", Value: state}
	if resp, _ := b.do("GET", cb, nil, bind, nil); resp.StatusCode != 200 {
		t.Errorf("callback with the cookie: %d", resp.StatusCode)
	}
	if resp, _ := b.do("GET", cb, nil, bind, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the same state again: %d, want 400", resp.StatusCode)
	}

	if session, code, body := b.loginVia(f, "nobody"); session != nil || code != http.StatusForbidden || !strings.Contains(body, "no role in this console") || !strings.Contains(body, "Ask whoever runs the console") {
		t.Errorf("a user without a role: %d, session %v: %s", code, session, body)
	}
	// The provider's error is shown escaped.
	resp, _ = b.do("GET", "/ui/login/start", nil, nil, nil)
	u, _ = url.Parse(resp.Header.Get("Location"))
	state = u.Query().Get("state")
	cb = "/ui/login/callback?" + url.Values{"state": {state}, "error": {"access_denied"}, "error_description": {"<script>x</script>"}}.Encode()
	if resp, body := b.do("GET", cb, nil, &http.Cookie{Name: "antidote_login", Value: state}, nil); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "<script>x") || !strings.Contains(body, "access_denied") {
		t.Errorf("the provider's error: %d %s", resp.StatusCode, body)
	}
}

// TestRoles: a viewer reads, sees the buttons greyed, and is refused every
// operator action with 403 and why; an operator (through the provider or
// the token) acts; every try is in the audit log, bounded.
func TestRoles(t *testing.T) {
	b, f, fc, h := rolesConsole(t)
	viewer, _, _ := b.loginVia(f, "viewer")
	resp, body := b.do("GET", "/ui/consumers/orders", nil, viewer, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `class="pause"`) || !strings.Contains(body, "disabled") || !strings.Contains(body, `id="viewer-note"`) {
		t.Fatalf("viewer's consumer page: %d; want the buttons greyed: %s", resp.StatusCode, body)
	}
	csrf := csrfRE.FindStringSubmatch(body)[1]
	actions := map[string]url.Values{
		"/ui/consumers/orders/pause":        {"topic": {"orders"}, "partition": {"0"}},
		"/ui/consumers/orders/resume":       {"topic": {"orders"}, "partition": {"0"}},
		"/ui/consumers/orders/retry":        {"enabled": {"off"}},
		"/ui/consumers/orders/skip":         {"topic": {"orders"}, "partition": {"0"}, "offset": {"3"}},
		"/ui/consumers/orders/deadletter":   {"topic": {"orders"}, "partition": {"0"}, "offset": {"3"}},
		"/ui/consumers/orders/flood/resume": {},
		"/ui/topics/orders.dlq/redrive":     {"action": {"dry-run"}},
		"/ui/jobs/1/stop":                   {},
		"/ui/jobs/1/purge":                  {"confirm": {"yes"}, "below": {"0:9"}},
	}
	for path, form := range actions {
		form.Set("csrf", csrf)
		resp, body := b.do("POST", path, form, viewer, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "viewer@example.com is a viewer") || !strings.Contains(body, "operator role") {
			t.Errorf("viewer POST %s: %d, want 403 saying why", path, resp.StatusCode)
		}
	}
	if len(fc.calls) != 0 {
		t.Errorf("a viewer's action reached the consumer: %v", fc.calls)
	}

	operator, _, _ := b.loginVia(f, "operator")
	_, body = b.do("GET", "/ui/consumers/orders", nil, operator, nil)
	if strings.Contains(body, "disabled") || strings.Contains(body, `id="viewer-note"`) {
		t.Errorf("the operator's buttons are greyed")
	}
	opCSRF := csrfRE.FindStringSubmatch(body)[1]
	if resp, _ := b.do("POST", "/ui/consumers/orders/pause", url.Values{"csrf": {opCSRF}, "topic": {"orders"}, "partition": {"0"}}, operator, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("operator's pause: %d, want 303", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/ui/consumers/orders/skip", url.Values{"csrf": {opCSRF}, "topic": {"orders"}, "partition": {"x"}}, operator, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("operator's malformed skip: %d, want 400", resp.StatusCode)
	}
	// The token is an operator's, by bearer too.
	if resp, _ := b.do("POST", "/ui/consumers/orders/resume", url.Values{"topic": {"orders"}, "partition": {"0"}}, nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("bearer resume: %d, want 303", resp.StatusCode)
	}
	if got := strings.Join(fc.calls, ","); got != "pause orders/0,resume orders/0" {
		t.Errorf("calls %q", got)
	}

	// The log keeps the last 3 (AuditSize), newest first.
	audit := h.Audit()
	want := []struct{ who, action, result string }{
		{"token (bearer)", "resume", "ok"},
		{"operator@example.com", "skip", "failed: want a topic and a partition"},
		{"operator@example.com", "pause", "ok"},
	}
	if len(audit) != len(want) {
		t.Fatalf("audit log: %d entries, want %d: %+v", len(audit), len(want), audit)
	}
	for i, w := range want {
		if e := audit[i]; e.Who != w.who || e.Action != w.action || e.Result != w.result || e.Time.IsZero() {
			t.Errorf("audit[%d] = %+v, want %+v", i, e, w)
		}
	}
	if !strings.Contains(audit[2].Target, "consumer orders, topic orders, partition 0") || audit[2].Role != console.RoleOperator || audit[2].Status != http.StatusSeeOther {
		t.Errorf("the pause's entry: %+v", audit[2])
	}
	// The viewer reads the log, as a page and as JSON.
	resp, body = b.do("GET", "/ui/audit", nil, viewer, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "operator@example.com") || !strings.Contains(body, "want a topic and a partition") {
		t.Errorf("audit page: %d %s", resp.StatusCode, body)
	}
	resp, body = b.do("GET", "/ui/audit.json", nil, viewer, nil)
	var js struct{ Entries []console.AuditEntry }
	if err := json.Unmarshal([]byte(body), &js); err != nil || resp.StatusCode != 200 || len(js.Entries) != 3 || js.Entries[0].Action != "resume" {
		t.Errorf("audit.json: %d %v %s", resp.StatusCode, err, body)
	}
}

// TestAuditRefusals: a viewer's refused try is in the log, with who.
func TestAuditRefusals(t *testing.T) {
	b, f, _, h := rolesConsole(t)
	viewer, _, _ := b.loginVia(f, "viewer")
	_, body := b.do("GET", "/ui/consumers/orders", nil, viewer, nil)
	csrf := csrfRE.FindStringSubmatch(body)[1]
	b.do("POST", "/ui/consumers/orders/skip", url.Values{"csrf": {csrf}, "topic": {"orders"}, "partition": {"0"}, "offset": {"7"}}, viewer, nil)
	a := h.Audit()
	if len(a) != 1 || a[0].Who != "viewer@example.com" || a[0].Role != console.RoleViewer || a[0].Status != http.StatusForbidden ||
		!strings.HasPrefix(a[0].Result, "refused") || !strings.Contains(a[0].Target, "offset 7") {
		t.Errorf("audit %+v", a)
	}
}

// TestAuditAdminAPI: the changes asked of the admin API that serves the
// console are in the console's audit log, with their result.
func TestAuditAdminAPI(t *testing.T) {
	fc := &fakeConsumer{stats: consumer.Stats{Running: true, Partitions: []consumer.Partition{{Topic: "orders", Partition: 0, State: consumer.PartitionFlowing}}}}
	con, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token, Prefix: "/ui/",
		Logger: slog.New(slog.DiscardHandler), Consumers: map[string]admin.Consumer{"orders": fc},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	adm, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"orders": fc}, Console: con, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(adm)
	defer srv.Close()
	post := func(path string) int {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/partitions/orders/0/pause"); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	if code := post("/partitions/orders/x/resume"); code != 400 {
		t.Fatalf("malformed resume: %d", code)
	}
	a := con.Audit()
	if len(a) != 2 {
		t.Fatalf("audit %+v; want the API's 2 changes", a)
	}
	if e := a[1]; e.Who != "admin API token" || e.Action != "pause" || e.Target != "topic orders, partition 0" || e.Status != 200 || e.Result != "ok" {
		t.Errorf("the pause: %+v", e)
	}
	if e := a[0]; e.Action != "resume" || e.Status != 400 || !strings.HasPrefix(e.Result, "failed: ") || len(e.Result) < 12 {
		t.Errorf("the malformed resume: %+v", e)
	}
}

// TestConfigURL: Config.URL is the console's absolute URL, ending in its
// prefix.
func TestConfigURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://antidote.example/ui/":     true,
		"http://127.0.0.1:9180/ui/":        true,
		"https://antidote.example/":        false, // not under /ui/
		"/ui/":                             false,
		"ftp://antidote.example/ui/":       false,
		"https://antidote.example/ui/?a=b": false,
	} {
		h, err := console.New(console.Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token, Prefix: "/ui/", URL: u, Logger: slog.New(slog.DiscardHandler)})
		if (err == nil) != ok {
			t.Errorf("URL %q: %v", u, err)
		}
		if h != nil {
			h.Close()
		}
	}
}
