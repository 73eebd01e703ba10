package clitest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// The environment of the test OpenID provider (scripts/dex.sh env).
const (
	EnvOIDCIssuer  = "ANTIDOTE_OIDC_ISSUER"  // its issuer URL
	EnvOIDCConsole = "ANTIDOTE_OIDC_CONSOLE" // the console URL its client sends browsers back to
)

// OIDCProvider returns the issuer and console URL of the test provider,
// or skips t without them.
func OIDCProvider(t *testing.T) (issuer, consoleURL string) {
	t.Helper()
	issuer, consoleURL = os.Getenv(EnvOIDCIssuer), os.Getenv(EnvOIDCConsole)
	if issuer == "" || consoleURL == "" {
		t.Skipf("%s and %s are not set: scripts/dex.sh start, then eval \"$(scripts/dex.sh env)\"", EnvOIDCIssuer, EnvOIDCConsole)
	}
	return issuer, consoleURL
}

// ProviderLogin plays a browser at the test provider (Dex): it opens
// authURL, fills the provider's login form as user with password, and
// returns the query that the provider sends the browser back to the
// console's callback with (under consoleURL).
func ProviderLogin(t *testing.T, authURL, consoleURL, user, password string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	idp := &http.Client{Timeout: 30 * time.Second, Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), consoleURL) {
			return http.ErrUseLastResponse // back to the console: the browser would go there
		}
		return nil
	}}
	form, err := idp.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(form.Body)
	form.Body.Close()
	if form.StatusCode != 200 || !strings.Contains(string(b), `name="password"`) {
		t.Fatalf("the provider's login form: %d %s", form.StatusCode, b)
	}
	back, err := idp.PostForm(form.Request.URL.String(), url.Values{"login": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	back.Body.Close()
	cb, _ := url.Parse(back.Header.Get("Location"))
	if cb == nil || !strings.HasPrefix(cb.String(), consoleURL) || !strings.Contains(cb.Path, "login/callback") || cb.Query().Get("code") == "" {
		t.Fatalf("the provider sent the browser to %q (%d), want the console's callback with a code", back.Header.Get("Location"), back.StatusCode)
	}
	return cb.RawQuery
}
