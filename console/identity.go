package console

import (
	"context"
	"errors"
)

// Role is what a caller of the console may do.
type Role string

// The roles. A viewer reads every page; an operator also acts: redrive,
// stop a redrive, purge the letters of a redrive, the retry kill switch,
// skip, dead-letter, pause, resume, the flood guard. The token's callers (its login, and scripts with
// "Authorization: Bearer") are operators.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
)

// Identity is who logged in through a [Login], and their role.
type Identity struct {
	// Subject is the provider's id of the user.
	Subject string
	// Name is what the console shows and the audit log keeps: an email
	// address, a user name, else the subject.
	Name string
	// Role is RoleViewer or RoleOperator.
	Role Role
}

// ErrNoRole is wrapped by the error of a [Login] whose user has no role in
// the console: the login is refused with 403.
var ErrNoRole = errors.New("no role in this console")

// Login is a way to log in beside the token, such as OpenID Connect
// (package github.com/antidote-kafka/antidote/console/oidc, a module of its
// own so that the core module needs nothing of it). The console keeps the
// state, nonce and PKCE verifier of each login, checks the state when the
// browser comes back to redirect (the console's [Config.URL] followed by
// "login/callback"), and starts a session for the Identity that Exchange
// returns. Its methods are called concurrently; ctx is the request's.
type Login interface {
	// Label is the text of the login page's button, such as "Log in
	// with Dex".
	Label() string
	// AuthURL returns where to send the browser: the provider's
	// authorization endpoint for an authorization code, with state, nonce
	// and the S256 challenge of verifier, coming back to redirect.
	AuthURL(ctx context.Context, redirect, state, nonce, verifier string) (string, error)
	// Exchange trades the code for the caller's identity: it sends the
	// verifier, verifies the ID token (signature, issuer, audience,
	// expiry) and its nonce, and maps its claims to a role. A user with
	// none is refused with an error wrapping [ErrNoRole].
	Exchange(ctx context.Context, redirect, code, verifier, nonce string) (Identity, error)
}
