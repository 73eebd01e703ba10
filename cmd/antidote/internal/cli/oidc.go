package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/antidote-kafka/antidote/console/oidc"
)

// OIDCLogin returns the console's login through the OpenID Connect
// provider of cfg, reached with the certificate authorities of caFile
// (PEM; the system's when empty). It reads the provider's discovery
// document, so the provider must answer within 30 seconds.
func OIDCLogin(ctx context.Context, cfg oidc.Config, caFile string) (*oidc.Login, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in it", caFile)
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Proxy: http.ProxyFromEnvironment}
	}
	cfg.HTTPClient = hc
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return oidc.New(ctx, cfg)
}
