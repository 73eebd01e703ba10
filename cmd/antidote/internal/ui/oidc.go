package ui

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/console/oidc"
)

// EnvOIDCClientSecret is read for the client's secret without
// --oidc-client-secret-file.
const EnvOIDCClientSecret = "ANTIDOTE_OIDC_CLIENT_SECRET"

// oidcFlags are the flags of the login through an OpenID Connect provider.
type oidcFlags struct {
	issuer, clientID, secretFile, roleClaim, caFile, label string
	operators, viewers                                     []string
}

func (o *oidcFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&o.issuer, "oidc-issuer", "", "OpenID Connect provider's issuer URL: log in through it beside the token")
	fs.StringVar(&o.clientID, "oidc-client-id", "", "the console's client id at the provider")
	fs.StringVar(&o.secretFile, "oidc-client-secret-file", "", "file holding the client's secret (else env "+EnvOIDCClientSecret+"; none for a public client)")
	fs.StringSliceVar(&o.operators, "oidc-operators", nil, "values of the role claim (groups) that make an operator")
	fs.StringSliceVar(&o.viewers, "oidc-viewers", nil, `values of the role claim (groups) that make a viewer ("*": any user of the provider)`)
	fs.StringVar(&o.roleClaim, "oidc-role-claim", "groups", "the ID token's claim that --oidc-operators and --oidc-viewers match")
	fs.StringVar(&o.caFile, "oidc-ca", "", "PEM file of the certificate authorities that sign the provider's certificate (default: the system's)")
	fs.StringVar(&o.label, "oidc-label", "", `the login button's text (default "Log in with OpenID Connect")`)
}

// login reads the provider's discovery document and returns the login.
func (o *oidcFlags) login(ctx context.Context) (*oidc.Login, error) {
	if o.clientID == "" {
		return nil, cli.Usagef("--oidc-issuer needs --oidc-client-id: the console's client at the provider")
	}
	if len(o.operators) == 0 && len(o.viewers) == 0 {
		return nil, cli.Usagef("--oidc-issuer needs --oidc-operators or --oidc-viewers: the groups whose users are operators or viewers")
	}
	secret := strings.TrimSpace(os.Getenv(EnvOIDCClientSecret))
	if o.secretFile != "" {
		b, err := os.ReadFile(o.secretFile)
		if err != nil {
			return nil, cli.Usagef("--oidc-client-secret-file: %v", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	l, err := cli.OIDCLogin(ctx, oidc.Config{
		Issuer: o.issuer, ClientID: o.clientID, ClientSecret: secret, RoleClaim: o.roleClaim,
		Operators: o.operators, Viewers: o.viewers, Label: o.label,
	}, o.caFile)
	if err != nil {
		return nil, fmt.Errorf("--oidc-issuer %s: %w", o.issuer, err)
	}
	return l, nil
}
