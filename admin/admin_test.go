package admin_test

import (
	"bytes"
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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
)

// fake is a Consumer with one assigned partition, orders/0, stuck on
// offset 5.
type fake struct {
	mu      sync.Mutex
	ready   bool
	retry   bool
	paused  bool
	flood   bool
	skips   []int64
	letters []string // who asked, for each dead letter
}

func (f *fake) ResumeFlood() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.flood {
		return consumer.ErrNotFlooded
	}
	f.flood = false
	return nil
}

func (f *fake) Stats() consumer.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return consumer.Stats{Ready: f.ready, Running: f.ready, RetryEnabled: f.retry,
		Partitions: []consumer.Partition{{Topic: "orders", Partition: 0, State: consumer.PartitionStuck}}}
}
func (f *fake) SetRetryEnabled(on bool) { f.mu.Lock(); f.retry = on; f.mu.Unlock() }
func (f *fake) RetryEnabled() bool      { f.mu.Lock(); defer f.mu.Unlock(); return f.retry }
func (f *fake) owned(topic string, p int32) error {
	if topic != "orders" || p != 0 {
		return fmt.Errorf("%w: %s/%d", consumer.ErrNotAssigned, topic, p)
	}
	return nil
}
func (f *fake) Skip(topic string, p int32, off int64) error {
	if err := f.owned(topic, p); err != nil {
		return err
	}
	if off != 5 {
		return fmt.Errorf("%w: stuck on offset 5, not %d", consumer.ErrNotStuck, off)
	}
	f.mu.Lock()
	f.skips = append(f.skips, off)
	f.mu.Unlock()
	return nil
}
func (f *fake) DeadLetter(topic string, p int32, off int64, who string) error {
	if err := f.owned(topic, p); err != nil {
		return err
	}
	switch off {
	case 5:
	case 6:
		return fmt.Errorf("%w: offset 6 is stuck on its dead-letter write", consumer.ErrNotRetrying)
	default:
		return fmt.Errorf("%w: stuck on offset 5, not %d", consumer.ErrNotStuck, off)
	}
	f.mu.Lock()
	f.letters = append(f.letters, who)
	f.mu.Unlock()
	return nil
}
func (f *fake) Pause(topic string, p int32) error {
	if err := f.owned(topic, p); err != nil {
		return err
	}
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
	return nil
}
func (f *fake) Resume(topic string, p int32) error {
	if err := f.owned(topic, p); err != nil {
		return err
	}
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
	return nil
}

func do(t testing.TB, h http.Handler, method, target, token string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	if rec.Code != 200 || rec.Header().Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s %s: %d body %q is not JSON: %v", method, target, rec.Code, rec.Body, err)
		}
	}
	return rec.Code, body, rec.Header()
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]admin.Config{
		"no consumers":    {},
		"nil consumer":    {Consumers: map[string]admin.Consumer{"a": nil}},
		"bad name":        {Consumers: map[string]admin.Consumer{"a b": &fake{}}},
		"empty name":      {Consumers: map[string]admin.Consumer{"": &fake{}}},
		"token with a nl": {Consumers: map[string]admin.Consumer{"a": &fake{}}, Token: "a\nb"},
	} {
		if _, err := admin.New(cfg); !errors.Is(err, admin.ErrConfig) {
			t.Errorf("%s: New = %v; want ErrConfig", name, err)
		}
	}
}

func TestTokenSources(t *testing.T) {
	cons := map[string]admin.Consumer{"a": &fake{}}
	t.Setenv(admin.EnvToken, "from-env")
	h, err := admin.New(admin.Config{Consumers: cons, Token: "from-config"})
	if err != nil || h.Token() != "from-config" {
		t.Fatalf("config token: %v %q", err, h.Token())
	}
	h, _ = admin.New(admin.Config{Consumers: cons})
	if h.Token() != "from-env" {
		t.Fatalf("env token = %q", h.Token())
	}
	t.Setenv(admin.EnvToken, "")
	var logs bytes.Buffer
	h1, _ := admin.New(admin.Config{Consumers: cons, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h2, _ := admin.New(admin.Config{Consumers: cons, Logger: slog.New(slog.DiscardHandler)})
	if len(h1.Token()) < 32 || h1.Token() == h2.Token() {
		t.Fatalf("generated tokens %q and %q: want long and different", h1.Token(), h2.Token())
	}
	if n := strings.Count(logs.String(), h1.Token()); n != 1 {
		t.Fatalf("the generated token is logged %d times; want once:\n%s", n, logs.String())
	}
	if code, _, _ := do(t, h1, "POST", "/retry?enabled=off", h1.Token()); code != 200 {
		t.Fatalf("POST with the generated token = %d", code)
	}
	if code, _, hdr := do(t, h1, "POST", "/retry?enabled=off", h2.Token()); code != 401 || hdr.Get("WWW-Authenticate") == "" {
		t.Fatalf("POST with another token = %d", code)
	}
}

func TestAuthorizationHeader(t *testing.T) {
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{}}, Token: "tok", Logger: slog.New(slog.DiscardHandler)})
	for hdr, want := range map[string]int{
		"Bearer tok": 200, "bearer tok": 200, "Bearer  tok ": 200,
		"": 401, "tok": 401, "Basic tok": 401, "Bearer": 401, "Bearer tok2": 401, "Bearer to": 401,
	} {
		req := httptest.NewRequest("POST", "/retry?enabled=on", nil)
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Authorization %q: %d; want %d", hdr, rec.Code, want)
		}
	}
}

func TestSeveralConsumers(t *testing.T) {
	a, b := &fake{ready: true, retry: true}, &fake{retry: true}
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": a, "b": b}, Token: "tok", Logger: slog.New(slog.DiscardHandler)})

	code, body, _ := do(t, h, "POST", "/retry?enabled=off", "tok")
	if code != 400 || !strings.Contains(body["error"].(string), "?consumer=NAME") || !a.RetryEnabled() || !b.RetryEnabled() {
		t.Fatalf("POST /retry without a name = %d %v; want 400 and no change", code, body)
	}
	if code, body, _ := do(t, h, "POST", "/retry?enabled=off&consumer=b", "tok"); code != 200 || body["consumer"] != "b" || !a.RetryEnabled() || b.RetryEnabled() {
		t.Fatalf("POST /retry?consumer=b = %d %v; want b only", code, body)
	}
	if code, _, _ := do(t, h, "POST", "/partitions/orders/0/skip?offset=5", "tok"); code != 400 {
		t.Fatalf("skip without a name = %d; want 400", code)
	}
	if code, _, _ := do(t, h, "POST", "/partitions/orders/0/skip?offset=5&consumer=a", "tok"); code != 200 || len(a.skips) != 1 || len(b.skips) != 0 {
		t.Fatalf("skip on a = %d (%v, %v)", code, a.skips, b.skips)
	}
	code, body, _ = do(t, h, "GET", "/stats", "tok")
	if cs := body["consumers"].(map[string]any); code != 200 || len(cs) != 2 {
		t.Fatalf("/stats = %d %v; want both consumers", code, body)
	}
	code, body, _ = do(t, h, "GET", "/readyz", "")
	if code != 503 || !strings.Contains(body["error"].(string), "b: not running") || body["consumers"].(map[string]any)["a"] != "ready" {
		t.Fatalf("/readyz = %d %v; want 503 naming b", code, body)
	}
	b.mu.Lock()
	b.ready = true
	b.mu.Unlock()
	if code, body, _ := do(t, h, "GET", "/readyz", ""); code != 200 || body["ready"] != true {
		t.Fatalf("/readyz = %d %v; want 200", code, body)
	}
}

func TestRoutes(t *testing.T) {
	f := &fake{ready: true}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "antidote_ready 1") })
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": f}, Token: "tok", Metrics: metrics, Logger: slog.New(slog.DiscardHandler)})
	open, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": f}, Token: "tok", OpenReads: true, Logger: slog.New(slog.DiscardHandler)})
	cases := []struct {
		h             http.Handler
		method, path  string
		token         string
		status        int
		allow, errHas string
	}{
		{h, "GET", "/healthz", "", 200, "", ""},
		{h, "HEAD", "/readyz", "", 200, "", ""},
		{h, "GET", "/stats", "", 401, "", "missing bearer token: send Authorization: Bearer TOKEN, the token the admin API was started with (Config.Token or ANTIDOTE_ADMIN_TOKEN)"},
		{h, "GET", "/metrics", "", 401, "", "missing bearer token"},
		{h, "GET", "/metrics", "tok", 200, "", ""},
		{open, "GET", "/stats", "", 200, "", ""},
		{open, "GET", "/metrics", "", 404, "", "no metrics configured"},
		{open, "POST", "/retry?enabled=on", "", 401, "", "missing bearer token"},
		{h, "GET", "/stats?consumer=zz", "tok", 404, "", "no consumer named"},
		{h, "POST", "/healthz", "tok", 405, "GET, HEAD", "not allowed"},
		{h, "DELETE", "/stats", "tok", 405, "GET, HEAD", "not allowed"},
		{h, "GET", "/retry", "tok", 405, "POST", "not allowed"},
		{h, "PUT", "/partitions/orders/0/pause", "tok", 405, "POST", "not allowed"},
		{h, "GET", "/nope", "tok", 404, "", "no such endpoint"},
		{h, "POST", "/partitions", "tok", 400, "", "malformed path"},
		{h, "POST", "/partitions/orders", "tok", 400, "", "malformed path"},
		{h, "POST", "/partitions/orders/0/1/skip", "tok", 400, "", "malformed path"},
		{h, "POST", "/partitions/orders/99999999999/pause", "tok", 400, "", "malformed partition"},
		{h, "POST", "/partitions/" + strings.Repeat("t", 250) + "/0/pause", "tok", 400, "", "malformed topic"},
		{h, "POST", "/partitions/orders/0/skip?offset=-1", "tok", 400, "", "malformed offset"},
		{h, "POST", "/partitions/orders/0/skip?offset=", "tok", 400, "", "malformed offset"},
		{h, "POST", "/partitions/orders/0/skip?offset=4", "tok", 409, "", "not 4"},
		{h, "POST", "/partitions/orders/1/skip?offset=5", "tok", 404, "", "not assigned"},
		{h, "POST", "/partitions/orders/0/skip?offset=5", "tok", 200, "", ""},
		{h, "POST", "/partitions/orders/0/deadletter", "tok", 400, "", "missing query parameter offset"},
		{h, "POST", "/partitions/orders/0/deadletter?offset=4", "tok", 409, "", "not 4"},
		{h, "POST", "/partitions/orders/0/deadletter?offset=6", "tok", 409, "", "dead-letter write"},
		{h, "POST", "/partitions/orders/0/deadletter?offset=5&who=alice", "tok", 200, "", ""},
		{h, "POST", "/partitions/orders/0/deadletter?offset=5", "tok", 200, "", ""},
		{h, "POST", "/partitions/orders/0/pause", "tok", 200, "", ""},
		{h, "POST", "/retry", "tok", 400, "", "missing query parameter enabled"},
		{h, "POST", "/retry?enabled=" + strings.Repeat("x", 100), "tok", 400, "", "want on or off"},
	}
	for _, tc := range cases {
		code, body, hdr := do(t, tc.h, tc.method, tc.path, tc.token)
		msg, _ := body["error"].(string)
		if code != tc.status || !strings.Contains(msg, tc.errHas) || hdr.Get("Allow") != tc.allow {
			t.Errorf("%s %s = %d %v (Allow %q); want %d with %q (Allow %q)", tc.method, tc.path, code, body, hdr.Get("Allow"), tc.status, tc.errHas, tc.allow)
		}
		if len(msg) > 400 {
			t.Errorf("%s %s: error of %d bytes: input echoed back untruncated", tc.method, tc.path, len(msg))
		}
	}
	if len(f.letters) != 2 || f.letters[0] != "alice" || !strings.HasPrefix(f.letters[1], "admin API, ") {
		t.Fatalf("dead letters asked by %q; want alice, then the admin API and the caller's address", f.letters)
	}
	if !f.paused || len(f.skips) != 1 {
		t.Fatalf("paused %v, skips %v", f.paused, f.skips)
	}
}

func TestListenIsLoopbackByDefault(t *testing.T) {
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{}}, Token: "tok"})
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		if ln, err := h.Listen(addr); !errors.Is(err, admin.ErrConfig) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%q) = %v; want ErrConfig", addr, err)
		}
	}
	for _, addr := range []string{":0", "localhost:0", "127.0.0.1:0"} {
		ln, err := h.Listen(addr)
		if err != nil {
			t.Fatalf("Listen(%q) = %v", addr, err)
		}
		if got := ln.Addr().String(); !strings.HasPrefix(got, "127.0.0.1:") {
			t.Errorf("Listen(%q) listens on %s; want 127.0.0.1", addr, got)
		}
		ln.Close()
	}
	remote, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{}}, Token: "tok", AllowRemote: true})
	ln, err := remote.Listen("0.0.0.0:0")
	if err != nil {
		t.Fatalf("Listen with AllowRemote = %v", err)
	}
	ln.Close()
}

// FuzzHandler: any method, path, query and Authorization header gets a JSON
// answer below 500, and never a panic.
func FuzzHandler(f *testing.F) {
	for _, s := range [][3]string{
		{"POST", "/partitions/orders/0/skip?offset=5", "Bearer tok"},
		{"POST", "/partitions/orders/0/skip?offset=99999999999999999999", "Bearer tok"},
		{"POST", "/partitions/%00/0/pause", "Bearer tok"},
		{"POST", "/retry?enabled=on&consumer=a&consumer=b", "Bearer tok"},
		{"GET", "/stats?consumer=%ff", "bearer tok"},
		{"PATCH", "/partitions/a/b/c/d", "Bearer \x00"},
		{"GET", "/", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{}}, Token: "tok", Logger: slog.New(slog.DiscardHandler)})
	f.Fuzz(func(t *testing.T, method, target, auth string) {
		req, err := http.NewRequest(method, "http://127.0.0.1"+target, nil)
		if err != nil || req.URL.Path == "" || req.URL.Path[0] != '/' {
			return
		}
		req.RequestURI = req.URL.RequestURI()
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && !json.Valid(rec.Body.Bytes()) && rec.Code != http.StatusMovedPermanently {
			t.Fatalf("%s %q: %d with a body that is not JSON: %q", method, target, rec.Code, rec.Body)
		}
	})
}

// TestForeignHost: on a loopback listener, a request whose Host is another
// site's name (DNS rebinding) is answered 421, even /healthz.
func TestForeignHost(t *testing.T) {
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{ready: true}}, Token: "tok", OpenReads: true, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for host, want := range map[string]int{
		"": 200, "localhost": 200, "evil.example": http.StatusMisdirectedRequest, "evil.example:80": http.StatusMisdirectedRequest,
	} {
		for _, path := range []string{"/healthz", "/readyz", "/stats"} {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			if host != "" {
				req.Host = host
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want && !(want == 200 && resp.StatusCode == 503) {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, resp.StatusCode, want)
			}
		}
	}
}

// TestWrongTokensThrottled: after a burst of wrong tokens, a request with
// a token is answered 429 with Retry-After, the right token too.
func TestWrongTokensThrottled(t *testing.T) {
	h, _ := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{}}, Token: "tok", Logger: slog.New(slog.DiscardHandler)})
	for i := range 10 {
		if code, _, _ := do(t, h, "POST", "/retry?enabled=on", fmt.Sprint("guess-", i)); code != 401 {
			t.Fatalf("wrong token %d: %d, want 401", i, code)
		}
	}
	for _, tok := range []string{"guess-10", "tok"} {
		code, body, hdr := do(t, h, "POST", "/retry?enabled=on", tok)
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Errorf("after 10 wrong tokens, token %q: %d %v (Retry-After %q), want 429", tok, code, body, hdr.Get("Retry-After"))
		}
	}
	// Without a token: 401 as before, and no try taken.
	if code, _, _ := do(t, h, "POST", "/retry?enabled=on", ""); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
}

// TestConsoleToken: with no token of its own, the admin API takes its
// console's, so that one token logs in at /ui/ and acts on the API.
func TestConsoleToken(t *testing.T) {
	t.Setenv(admin.EnvToken, "")
	con, err := console.New(console.Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Prefix: "/ui/", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	h, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"a": &fake{}}, Console: con, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if h.Token() != con.Token() || h.Token() == "" {
		t.Fatalf("admin token %q, console token %q: want one token", h.Token(), con.Token())
	}
	if code, body, _ := do(t, h, "POST", "/retry?enabled=off", con.Token()); code != 200 {
		t.Errorf("POST with the console's token: %d %v", code, body)
	}
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {h.Token()}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Errorf("console login with the admin API's token: %d, want 303", rec.Code)
	}
}
