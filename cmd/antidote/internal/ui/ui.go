// Package ui is antidote ui: the web console of dead letters, on loopback
// or, over TLS, on the network.
package ui

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/framed"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// defaultUIListen is the default of antidote ui --listen.
const defaultUIListen = "127.0.0.1:9190"

// NewCommand builds antidote ui: the web console of a cluster's dead
// letters, on loopback.
func NewCommand() *cobra.Command {
	var (
		listen, registryURL, token string
		certFile, keyFile          string
		publicURL                  string
		oc                         oidcFlags
		topics                     []string
		hideValues                 bool
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web console for dead letters (on loopback, or over TLS)",
		Long: `Serve the web console of a cluster's dead letters: the dead-letter topics
with their counts; for one topic, its letters over time by reason, stage or
class, the top errors, and a table that pages and filters as dlq ls does; one
letter with its failure in plain words, its key, value and headers; redrive
of picked letters or of a filter, with a dry run first (as dlq redrive runs it:
the same loop guard, the same resumable progress); and, once a redrive has
finished, the purge of the letters it redrove (as dlq purge --redriven finds
them, with the plan shown first).

It listens on a loopback address, or on another address over TLS only
(--https-cert and --https-key: a team shares the console without its logins
and session cookies crossing the network in the clear). The login page asks
for a token: --token, else the environment variable ` + admin.EnvToken + `
(the admin API's, so that one token opens both), else a random one printed at
start.
--registry decodes keys and values in the schema registry's wire format
(Avro, JSON Schema, Protobuf) with their schemas from the registry;
--hide-values shows keys and values as their size and SHA-256 only.

With --oidc-issuer, the login page also logs in through an OpenID Connect
provider (authorization code with PKCE): the users in --oidc-operators groups
are operators, those in --oidc-viewers viewers (they read, and every action is
refused them); whoever logs in with the token is an operator. Register --url followed by
login/callback as the client's redirect URL at the provider. Every operator
action is in the audit log (its page, /audit.json, and the log).`,
		Example: `  antidote ui --context prod
  antidote ui --brokers localhost:9092 --topic orders.dlq --listen 127.0.0.1:9190
  antidote ui --context prod --registry http://localhost:8081 --hide-values
  antidote ui --context prod --listen 0.0.0.0:9443 --https-cert console.pem --https-key console-key.pem
  antidote ui --context prod --listen 0.0.0.0:9443 --https-cert console.pem --https-key console-key.pem \
    --url https://antidote.example:9443/ --oidc-issuer https://dex.example --oidc-client-id antidote \
    --oidc-client-secret-file /run/secrets/oidc --oidc-operators kafka-oncall --oidc-viewers kafka-dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tlsCfg, err := serverTLS(listen, certFile, keyFile)
			if err != nil {
				return err
			}
			g := cli.ReadGlobals(cmd)
			ctx := cmd.Context()
			// Fail now, with the command's one-line error, when the
			// cluster does not answer.
			cl, err := g.Dial(ctx)
			if err != nil {
				return err
			}
			cl.Close()
			if len(topics) == 0 && g.Conn != nil && g.Conn.Topic != "" {
				topics = []string{g.Conn.Topic}
			}
			var opts []kgo.Opt
			if g.Conn != nil {
				opts = append(opts, g.Conn.Opts...)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg := console.Config{
				ClientOpts: append(opts, kgo.SeedBrokers(g.Brokers...)),
				Topics:     topics, HideValues: hideValues, Logger: log,
				IdleTimeout: max(g.Timeout, 10*time.Second),
			}
			if oc.issuer != "" {
				if cfg.Login, err = oc.login(ctx); err != nil {
					return err
				}
				cfg.URL = publicURL
			} else if publicURL != "" {
				cfg.URL = publicURL
			}
			if registryURL != "" {
				reg, err := registry.New(registryURL)
				if err != nil {
					return cli.Usagef("--registry %q: %v", registryURL, err)
				}
				dec, err := framed.New(reg)
				if err != nil {
					return err
				}
				cfg.Decode = func(ctx context.Context, _ string, _ bool, b []byte) (string, error) {
					v, err := dec.Decode(ctx, b)
					return v.JSON, err
				}
			}
			from := "--token"
			if token == "" {
				token, from = strings.TrimSpace(os.Getenv(admin.EnvToken)), admin.EnvToken
			}
			cfg.Token = token
			generated := token == ""
			if generated {
				// Printed below rather than logged by the console.
				var b [12]byte
				if _, err := rand.Read(b[:]); err != nil {
					return err
				}
				cfg.Token = hex.EncodeToString(b[:])
			}
			h, err := console.New(cfg)
			if err != nil {
				return err
			}
			defer h.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			u := "http://" + ln.Addr().String() + "/"
			if tlsCfg != nil {
				ln, u = tls.NewListener(ln, tlsCfg), "https://"+ln.Addr().String()+"/"
			}
			if generated {
				fmt.Fprintf(cmd.OutOrStdout(), "antidote console at %s (token %s; set %s to choose it)\n", u, h.Token(), admin.EnvToken)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "antidote console at %s (token from %s)\n", u, from)
			}
			return serveUntil(ctx, ln, h)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", defaultUIListen, "address to listen on (host:port): loopback, or another with --https-cert")
	fs.StringVar(&certFile, "https-cert", "", "PEM file of the console's certificate (chain): serve HTTPS, required on an address other than loopback")
	fs.StringVar(&keyFile, "https-key", "", "PEM file of the key of --https-cert")
	fs.StringVar(&token, "token", "", "the token the login page asks for (env "+admin.EnvToken+"; default a random one, printed)")
	fs.StringSliceVar(&topics, "topic", nil, "dead-letter topics to list (default: the context's topic, else every topic named like one)")
	fs.StringVar(&registryURL, "registry", "", "schema registry URL: show keys and values in its wire format (Avro, JSON Schema, Protobuf) decoded")
	fs.BoolVar(&hideValues, "hide-values", false, "show keys, values and original header values as size and SHA-256 only")
	fs.StringVar(&publicURL, "url", "", "the console's URL as browsers reach it, such as https://antidote.example:9443/ (default: from each request's Host)")
	oc.add(fs)
	_ = cmd.RegisterFlagCompletionFunc("topic", cli.CompleteTopics)
	return cmd
}

// serverTLS checks the listen address and returns the TLS configuration of
// --https-cert and --https-key, or nil for plain HTTP, which only a
// loopback address may serve.
func serverTLS(addr, certFile, keyFile string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, cli.Usagef("--listen %q: want HOST:PORT, for example %s", addr, defaultUIListen)
	}
	if (certFile == "") != (keyFile == "") {
		return nil, cli.Usagef("--https-cert and --https-key go together: the certificate and its key")
	}
	if certFile == "" {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, cli.Usagef("--listen %q is not a loopback address: a console shared on the network is served over TLS only; "+
				"give it a certificate with --https-cert FILE --https-key FILE, or listen on loopback (for example %s, reached from elsewhere through an SSH tunnel)", addr, defaultUIListen)
		}
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, cli.Usagef("--https-cert %s, --https-key %s: %v", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// serveUntil serves h on ln until ctx ends, then shuts down.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
