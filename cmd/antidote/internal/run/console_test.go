package run

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationRunSharedConsole: antidote run serves its admin API and
// console over TLS (admin.tls) and logs users in through a real OpenID
// provider (admin.oidc, admin.url; scripts/dex.sh): a viewer is refused a
// pause in the console, and the pause asked of the admin API with the
// token is in the console's audit log beside the refusal.
func TestIntegrationRunSharedConsole(t *testing.T) {
	issuer, consoleURL := clitest.OIDCProvider(t)
	c := kafkatest.New(t)
	raw, out := c.Topic(t, "run-shared", 1), c.Topic(t, "run-shared-out", 1)
	kafkatest.Produce(t, c.Client(t), &kgo.Record{Topic: raw, Value: []byte("r")})
	ca := kafkatest.NewCA(t)
	cert, key := ca.Issue(t, "127.0.0.1")
	secret := clitest.WriteFile(t, "oidc-secret", "antidote-test-secret\n")
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
admin:
  address: "127.0.0.1:0"
  token: run-token
  tls: {cert-file: %s, key-file: %s}
  url: %sui/
  oidc:
    issuer: %s
    client-id: antidote
    client-secret: ${file:%s}
    operators: [kafka-oncall]
    viewers: [kafka-dev]
    label: Log in with Dex
pipelines:
  - name: p
    topics: [%s]
    group: %s
    value: {format: bytes}
    sink:
      kafka: {topic: %s}
`, strings.Join(c.Brokers(), ", "), cert, key, consoleURL, issuer, secret, raw, kafkatest.UniqueName("shared"), out))
	_, logs := startRun(t, file)
	var base string
	clitest.WaitFor(t, 60*time.Second, "the admin API in the logs", func() bool { base = adminFromLogs(logs.String()); return base != "" }, logs.String)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("admin API at %s, want https", base)
	}
	cl := &http.Client{Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, edit func(*http.Request)) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if edit != nil {
			edit(req)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	withCookie := func(ck *http.Cookie) func(*http.Request) { return func(r *http.Request) { r.AddCookie(ck) } }
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer run-token") }

	if _, body := do("GET", "/ui/login", nil, nil); !strings.Contains(body, "Log in with Dex") {
		t.Fatalf("the login page does not offer the provider: %.300s", body)
	}
	resp, _ := do("GET", "/ui/login/start?next=/ui/", nil, nil)
	auth := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(auth, issuer+"/auth?") || len(resp.Cookies()) == 0 {
		t.Fatalf("login/start: %d to %q", resp.StatusCode, auth)
	}
	bind := resp.Cookies()[0]
	query := clitest.ProviderLogin(t, auth, consoleURL+"ui/", "viewer@example.com", "password")
	resp, body := do("GET", "/ui/login/callback?"+query, nil, withCookie(bind))
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "antidote_console" && ck.Value != "" {
			session = ck
		}
	}
	if resp.StatusCode != 200 || session == nil || !session.Secure || !strings.Contains(body, "(viewer)") {
		t.Fatalf("callback: %d, session %+v: %.500s", resp.StatusCode, session, body)
	}

	clitest.WaitFor(t, 60*time.Second, "the partition assigned", func() bool {
		_, body := do("GET", "/stats", nil, bearer)
		return strings.Contains(body, `"Topic":"`+raw+`"`)
	}, logs.String)
	_, page := do("GET", "/ui/consumers/p", nil, withCookie(session))
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the consumer page: %.500s", page)
	}
	resp, body = do("POST", "/ui/consumers/p/pause", url.Values{"csrf": {m[1]}, "topic": {raw}, "partition": {"0"}}, withCookie(session))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "viewer@example.com is a viewer") {
		t.Errorf("the viewer's pause: %d", resp.StatusCode)
	}
	if resp, body := do("POST", "/partitions/"+raw+"/0/pause", nil, bearer); resp.StatusCode != 200 {
		t.Errorf("the admin API's pause: %d %s", resp.StatusCode, body)
	}
	_, body = do("GET", "/ui/audit.json", nil, withCookie(session))
	var audit struct{ Entries []console.AuditEntry }
	if err := json.Unmarshal([]byte(body), &audit); err != nil || len(audit.Entries) != 2 {
		t.Fatalf("audit.json: %v %s", err, body)
	}
	if e := audit.Entries[0]; e.Who != "admin API token" || e.Action != "pause" || e.Result != "ok" {
		t.Errorf("the admin API's pause in the audit log: %+v", e)
	}
	if e := audit.Entries[1]; e.Who != "viewer@example.com" || e.Status != http.StatusForbidden {
		t.Errorf("the viewer's refusal in the audit log: %+v", e)
	}
}
