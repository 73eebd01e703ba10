package oidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/antidote-kafka/antidote/console"
)

// provider is an OpenID provider of one test: it hands out codes for
// users, checks the PKCE verifier of each code against its challenge, and
// signs ID tokens; tamper changes the claims it signs.
type provider struct {
	srv    *httptest.Server
	key    *rsa.PrivateKey
	mu     sync.Mutex
	codes  map[string]grant
	tamper func(map[string]any)
}

type grant struct {
	user      string
	groups    []string
	nonce     string
	challenge string
}

func newProvider(t *testing.T) *provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{key: key, codes: map[string]grant{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/auth", "token_endpoint": p.srv.URL + "/token",
			"jwks_uri": p.srv.URL + "/keys", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	m.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	m.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		p.mu.Lock()
		g, ok := p.codes[r.PostForm.Get("code")]
		delete(p.codes, r.PostForm.Get("code"))
		p.mu.Unlock()
		id, _, _ := r.BasicAuth()
		if !ok || id != "antidote" || challenge(r.PostForm.Get("code_verifier")) != g.challenge {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		claims := map[string]any{"iss": p.srv.URL, "sub": "sub-" + g.user, "aud": "antidote", "exp": time.Now().Add(time.Hour).Unix(),
			"iat": time.Now().Unix(), "nonce": g.nonce, "email": g.user + "@example.com", "groups": g.groups}
		if p.tamper != nil {
			p.tamper(claims)
		}
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		if err != nil {
			t.Error(err)
			return
		}
		b, _ := json.Marshal(claims)
		jws, err := sig.Sign(b)
		if err != nil {
			t.Error(err)
			return
		}
		raw, _ := jws.CompactSerialize()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": raw, "expires_in": 3600})
	})
	p.srv = httptest.NewServer(m)
	t.Cleanup(p.srv.Close)
	return p
}

// login plays the browser at the provider: user logs in at authURL and
// the provider hands back a code.
func (p *provider) login(t *testing.T, authURL, user string, groups ...string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil || !strings.HasPrefix(authURL, p.srv.URL+"/auth?") {
		t.Fatalf("auth URL %q", authURL)
	}
	q := u.Query()
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "antidote" ||
		!strings.Contains(" "+q.Get("scope")+" ", " openid ") || q.Get("state") == "" || q.Get("nonce") == "" {
		t.Fatalf("auth URL %q: want a code with S256 PKCE, openid, state and nonce", authURL)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	code := "code-" + user + "-" + q.Get("state")[:8]
	p.codes[code] = grant{user: user, groups: groups, nonce: q.Get("nonce"), challenge: q.Get("code_challenge")}
	return code
}

func TestLogin(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	l, err := New(ctx, Config{Issuer: p.srv.URL, ClientID: "antidote", ClientSecret: "s", Operators: []string{"oncall"}, Viewers: []string{"dev"}, Label: "Log in with Test"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Label() != "Log in with Test" {
		t.Errorf("label %q", l.Label())
	}
	const redirect = "https://antidote.example/ui/login/callback"
	const verifier = "0123456789abcdef0123456789abcdef0123456789abcdef"
	try := func(user, nonce, sentVerifier string, groups ...string) (console.Identity, error) {
		u, err := l.AuthURL(ctx, redirect, "state-"+user+"-0000", nonce, verifier)
		if err != nil {
			t.Fatal(err)
		}
		return l.Exchange(ctx, redirect, p.login(t, u, user, groups...), sentVerifier, nonce)
	}
	for _, c := range []struct {
		user   string
		groups []string
		role   console.Role
	}{
		{"ann", []string{"dev", "oncall"}, console.RoleOperator},
		{"bob", []string{"dev"}, console.RoleViewer},
	} {
		id, err := try(c.user, "n-"+c.user, verifier, c.groups...)
		if err != nil || id.Role != c.role || id.Name != c.user+"@example.com" || id.Subject != "sub-"+c.user {
			t.Errorf("%s in %v: %+v, %v; want %s", c.user, c.groups, id, err, c.role)
		}
	}
	if _, err := try("eve", "n-eve", verifier, "sales"); !errors.Is(err, console.ErrNoRole) {
		t.Errorf("a user in no mapped group: %v, want ErrNoRole", err)
	}
	if _, err := try("mal", "n-mal", strings.Repeat("x", 48), "oncall"); err == nil {
		t.Error("a code exchanged with another verifier was accepted")
	}
	// The token's nonce is not this login's (a replayed ID token).
	p.tamper = func(c map[string]any) { c["nonce"] = "another" }
	if _, err := try("ann", "n-ann", verifier, "oncall"); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Errorf("another nonce: %v", err)
	}
	// A token for another client.
	p.tamper = func(c map[string]any) { c["aud"] = "someone-else" }
	if _, err := try("ann", "n-ann", verifier, "oncall"); err == nil {
		t.Error("a token for another audience was accepted")
	}
	// A single group as a string; "*" viewers take anyone.
	p.tamper = func(c map[string]any) { c["groups"] = "oncall" }
	if id, err := try("ann", "n-ann", verifier); err != nil || id.Role != console.RoleOperator {
		t.Errorf("groups as a string: %+v %v", id, err)
	}
	p.tamper = nil
	l2, err := New(ctx, Config{Issuer: p.srv.URL, ClientID: "antidote", Viewers: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	l = l2
	if id, err := try("zed", "n-zed", verifier); err != nil || id.Role != console.RoleViewer {
		t.Errorf("viewers *: %+v %v", id, err)
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ClientID: "a", Viewers: []string{"*"}}, "Issuer is required"},
		{Config{Issuer: "http://127.0.0.1:1", Viewers: []string{"*"}}, "ClientID is required"},
		{Config{Issuer: "http://127.0.0.1:1", ClientID: "a"}, "no user would have a role"},
		{Config{Issuer: "http://127.0.0.1:1", ClientID: "a", Viewers: []string{"*"}}, "provider http://127.0.0.1:1"},
	} {
		if _, err := New(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
