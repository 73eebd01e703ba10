package ui

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationUIOIDC: antidote ui with the flags of a real OpenID
// provider (scripts/dex.sh: ANTIDOTE_OIDC_ISSUER, and ANTIDOTE_OIDC_CONSOLE,
// the console URL its client accepts) logs a user in: the login page
// offers the provider, which gets a code request with PKCE; the user fills
// the provider's form; the console exchanges the code (with the verifier
// and the client's secret from a file), verifies the ID token and starts a
// session of an operator, by group.
func TestIntegrationUIOIDC(t *testing.T) {
	issuer, consoleURL := clitest.OIDCProvider(t)
	c := kafkatest.New(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("antidote-test-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out clitest.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"ui", "--brokers", strings.Join(c.Brokers(), ","), "--listen", "127.0.0.1:0", "--token", "t",
			"--url", consoleURL, "--oidc-issuer", issuer, "--oidc-client-id", "antidote", "--oidc-client-secret-file", secret,
			"--oidc-operators", "kafka-oncall", "--oidc-viewers", "kafka-dev", "--oidc-label", "Log in with Dex"}, &out, &out)
	}()
	defer func() { stop(); <-done }()
	re := regexp.MustCompile(`antidote console at (http://127\.0\.0\.1:\d+/) `)
	clitest.WaitFor(t, 30*time.Second, "antidote ui to print its address", func() bool { return re.MatchString(out.String()) }, out.String)
	base := re.FindStringSubmatch(out.String())[1]

	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: noFollow}
	get := func(u string, cookies ...*http.Cookie) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if _, body := get(base + "login"); !strings.Contains(body, "Log in with Dex") {
		t.Fatalf("the login page does not offer the provider: %s", body)
	}
	resp, _ := get(base + "login/start?next=/")
	auth, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(auth.String(), issuer+"/auth?") ||
		auth.Query().Get("code_challenge_method") != "S256" || auth.Query().Get("redirect_uri") != consoleURL+"login/callback" {
		t.Fatalf("login/start: %d to %s", resp.StatusCode, auth)
	}
	bind := resp.Cookies()[0]

	// The user at the provider: its login form, then back with a code.
	query := clitest.ProviderLogin(t, auth.String(), consoleURL, "operator@example.com", "password")
	resp, body := get(base+"login/callback?"+query, bind)
	if resp.StatusCode != 200 || !strings.Contains(body, "operator@example.com") || !strings.Contains(body, "(operator)") {
		t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "antidote_console" && ck.Value != "" {
			session = ck
		}
	}
	if session == nil {
		t.Fatal("no session")
	}
	if resp, body := get(base, session); resp.StatusCode != 200 || !strings.Contains(body, "operator@example.com (operator)") {
		t.Errorf("the session: %d", resp.StatusCode)
	}
}
