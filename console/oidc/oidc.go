// Package oidc is the console's login with OpenID Connect: a
// [console.Login] that sends the browser to an identity provider (Dex,
// Keycloak, Okta, Entra ID, Google...) for an authorization code with PKCE
// (S256), state and nonce, verifies the ID token it gets back with the
// provider's published keys (github.com/coreos/go-oidc), and maps a claim
// of the token (groups by default) to the console's roles.
//
// It is a module of its own, as metrics/prom is, so that the core module
// (and so the console) depends on no OAuth library:
//
//	login, err := oidc.New(ctx, oidc.Config{
//		Issuer:    "https://dex.example",
//		ClientID:  "antidote",
//		Operators: []string{"kafka-oncall"},
//		Viewers:   []string{"kafka-dev"},
//	})
//	h, err := console.New(console.Config{..., Login: login})
//
// The provider must accept the console's redirect URL: its
// [console.Config.URL] followed by "login/callback".
package oidc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/antidote-kafka/antidote/console"
)

// Config configures the login. Issuer, ClientID and at least one of
// Operators and Viewers are required.
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document is
	// read at Issuer + "/.well-known/openid-configuration". Required.
	Issuer string
	// ClientID is the console's client at the provider. Required.
	ClientID string
	// ClientSecret is the client's secret. Optional: a public client
	// needs none (PKCE protects its codes).
	ClientSecret string
	// Scopes are asked for beside "openid". Optional; default profile,
	// email and groups (a provider that does not know groups leaves it
	// out, or sends the claim anyway).
	Scopes []string
	// RoleClaim is the claim of the ID token that roles are mapped from:
	// a string or a list of strings. Optional; default "groups".
	RoleClaim string
	// Operators are the values of RoleClaim that make a user an operator;
	// Viewers those that make a viewer ("*": any user the provider logs
	// in). A user with neither is refused. Operator wins over viewer.
	Operators, Viewers []string
	// NameClaims are the claims, in order, whose first non-empty string
	// names the user in the console and its audit log. Optional;
	// default email, preferred_username, name (else the subject).
	NameClaims []string
	// Label is the login button's text. Optional; default "Log in with
	// OpenID Connect".
	Label string
	// HTTPClient reaches the provider, for example with a CA of its
	// own. Optional; default a client with a 30-second timeout.
	HTTPClient *http.Client
}

// Login is the console's login through an OpenID Connect provider. Create
// it with [New]; it is safe for concurrent use.
type Login struct {
	cfg      Config
	oauth    oauth2.Config
	verifier *gooidc.IDTokenVerifier
}

var _ console.Login = (*Login)(nil)

// New validates cfg and reads the provider's discovery document (so the
// provider must answer now).
func New(ctx context.Context, cfg Config) (*Login, error) {
	switch {
	case cfg.Issuer == "":
		return nil, errors.New("oidc: Config.Issuer is required: the provider's issuer URL")
	case cfg.ClientID == "":
		return nil, errors.New("oidc: Config.ClientID is required: the console's client at the provider")
	case len(cfg.Operators) == 0 && len(cfg.Viewers) == 0:
		return nil, errors.New("oidc: Config.Operators or Config.Viewers is required: the values of the role claim (groups) that make an operator or a viewer; no user would have a role")
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"profile", "email", "groups"}
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "groups"
	}
	if cfg.NameClaims == nil {
		cfg.NameClaims = []string{"email", "preferred_username", "name"}
	}
	if cfg.Label == "" {
		cfg.Label = "Log in with OpenID Connect"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	p, err := gooidc.NewProvider(gooidc.ClientContext(ctx, cfg.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: provider %s: %w", cfg.Issuer, err)
	}
	return &Login{
		cfg: cfg,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: p.Endpoint(),
			Scopes: append([]string{gooidc.ScopeOpenID}, slices.DeleteFunc(slices.Clone(cfg.Scopes), func(s string) bool { return s == gooidc.ScopeOpenID })...),
		},
		verifier: p.Verifier(&gooidc.Config{ClientID: cfg.ClientID}),
	}, nil
}

// Label is the login button's text.
func (l *Login) Label() string { return l.cfg.Label }

// AuthURL is the provider's authorization endpoint for a code, with
// state, nonce and the S256 challenge of verifier.
func (l *Login) AuthURL(_ context.Context, redirect, state, nonce, verifier string) (string, error) {
	oc := l.oauth
	oc.RedirectURL = redirect
	return oc.AuthCodeURL(state, gooidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// Exchange trades the code (with the verifier) for the ID token, verifies
// it and its nonce, and maps its claims to who and a role.
func (l *Login) Exchange(ctx context.Context, redirect, code, verifier, nonce string) (console.Identity, error) {
	if code == "" {
		return console.Identity{}, errors.New("no code in the provider's answer")
	}
	ctx = gooidc.ClientContext(ctx, l.cfg.HTTPClient)
	oc := l.oauth
	oc.RedirectURL = redirect
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return console.Identity{}, fmt.Errorf("exchanging the code: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return console.Identity{}, errors.New("the provider sent no ID token (is openid among the client's scopes?)")
	}
	idt, err := l.verifier.Verify(ctx, raw)
	if err != nil {
		return console.Identity{}, fmt.Errorf("the ID token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return console.Identity{}, errors.New("the ID token's nonce is not this login's")
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return console.Identity{}, fmt.Errorf("the access token: %w", err)
		}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return console.Identity{}, fmt.Errorf("the ID token's claims: %w", err)
	}
	id := console.Identity{Subject: idt.Subject, Name: idt.Subject}
	for _, c := range l.cfg.NameClaims {
		if s, ok := claims[c].(string); ok && strings.TrimSpace(s) != "" {
			id.Name = s
			break
		}
	}
	values := claimValues(claims[l.cfg.RoleClaim])
	switch {
	case anyIn(values, l.cfg.Operators):
		id.Role = console.RoleOperator
	case slices.Contains(l.cfg.Viewers, "*") || anyIn(values, l.cfg.Viewers):
		id.Role = console.RoleViewer
	default:
		return console.Identity{}, fmt.Errorf("%s (%s %v): %w", id.Name, l.cfg.RoleClaim, values, console.ErrNoRole)
	}
	return id, nil
}

// claimValues reads a claim that is a string or a list of strings.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func anyIn(values, set []string) bool {
	for _, v := range values {
		if slices.Contains(set, v) {
			return true
		}
	}
	return false
}

// challenge is the S256 challenge of a PKCE verifier (RFC 7636), for
// tests that play the provider.
func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
