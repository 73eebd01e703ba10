package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Environment variables of the connection.
const (
	EnvConfig       = "ANTIDOTE_CONFIG"        // the config file
	EnvContext      = "ANTIDOTE_CONTEXT"       // the context to use
	EnvSASLUsername = "ANTIDOTE_SASL_USERNAME" // SASL user name
	EnvSASLPassword = "ANTIDOTE_SASL_PASSWORD" // SASL password (PLAIN, SCRAM)
	EnvSASLToken    = "ANTIDOTE_SASL_TOKEN"    // OAUTHBEARER token
)

// SASLMechanisms are the SASL mechanisms.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"}

// ConfigFile is the config file: named contexts, the way kubectl's and
// kaf's are.
//
//	current-context: prod
//	contexts:
//	  prod:
//	    brokers: [kafka-1.example.com:9093, kafka-2.example.com:9093]
//	    topic: orders.dlq
//	    tls:
//	      ca-file: /etc/kafka/ca.pem
//	    sasl:
//	      mechanism: SCRAM-SHA-512
//	      username: antidote
//	      password-file: /run/secrets/kafka-password
type ConfigFile struct {
	CurrentContext string                 `yaml:"current-context"`
	Contexts       map[string]ConnContext `yaml:"contexts"`
}

// ConnContext is one cluster: where it is and how to log in.
type ConnContext struct {
	Brokers []string    `yaml:"brokers"`
	Topic   string      `yaml:"topic"` // default --topic of the dlq commands
	TLS     *TLSConfig  `yaml:"tls"`
	SASL    *SASLConfig `yaml:"sasl"`
}

type TLSConfig struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca-file"`
	CertFile           string `yaml:"cert-file"`
	KeyFile            string `yaml:"key-file"`
	ServerName         string `yaml:"server-name"`
	InsecureSkipVerify bool   `yaml:"insecure-skip-verify"`
}

// SASLConfig holds no secret: passwords and tokens come from a file or an
// environment variable, never from the file itself or from a flag alone.
type SASLConfig struct {
	Mechanism    string `yaml:"mechanism"`
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password-file"`
	PasswordEnv  string `yaml:"password-env"`
	TokenFile    string `yaml:"token-file"`
	TokenEnv     string `yaml:"token-env"`
}

// DefaultConfigPath is $ANTIDOTE_CONFIG, else antidote/config.yaml in the
// user's config directory (~/.config/antidote/config.yaml on Linux).
func DefaultConfigPath() string {
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "antidote", "config.yaml")
}

// LoadConfig reads the config file at path. A missing file at the default
// path is no config; a missing file named explicitly is an error.
func LoadConfig(path string, explicit bool) (*ConfigFile, error) {
	if path == "" {
		return &ConfigFile{}, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return &ConfigFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var cf ConfigFile
	if err := yaml.UnmarshalWithOptions(b, &cf, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, OneLine(errors.New(yaml.FormatError(err, false, false))))
	}
	return &cf, nil
}

// addConnFlags adds the connection flags to the root.
func addConnFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.String("config", "", "config file with named contexts (default $"+EnvConfig+", else "+displayPath(DefaultConfigPath())+")")
	pf.String("context", "", "the context of the config file to use (default its current-context; env "+EnvContext+")")
	pf.Bool("tls", false, "connect with TLS (implied by the other --tls-* flags)")
	pf.String("tls-ca", "", "PEM file of the certificate authorities to trust (default: the system's)")
	pf.String("tls-cert", "", "PEM file of the client certificate, for mutual TLS (with --tls-key)")
	pf.String("tls-key", "", "PEM file of the client certificate's key")
	pf.String("tls-server-name", "", "the name to verify the brokers' certificates against (default: the broker host)")
	pf.Bool("tls-insecure-skip-verify", false, "do not verify the brokers' certificates (insecure: for tests only)")
	pf.String("sasl-mechanism", "", "SASL mechanism: "+strings.Join(SASLMechanisms, ", "))
	pf.String("sasl-username", "", "SASL user name (env "+EnvSASLUsername+")")
	pf.String("sasl-password-file", "", "file holding the SASL password (else env "+EnvSASLPassword+")")
	pf.String("sasl-token-file", "", "file holding the OAUTHBEARER token, read at each login (else env "+EnvSASLToken+")")
	for _, n := range []string{"tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "tls-insecure-skip-verify", "sasl-mechanism", "sasl-username", "sasl-password-file", "sasl-token-file"} {
		_ = pf.SetAnnotation(n, securityFlag, []string{"true"})
	}
	_ = root.RegisterFlagCompletionFunc("sasl-mechanism", cobra.FixedCompletions(SASLMechanisms, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("context", completeContexts)
}

// securityFlag annotates the TLS and SASL flags, which the help of a
// subcommand sums up in one line rather than listing them again.
const securityFlag = "antidote_security"

// globalFlagUsages is the "Global Flags" section of a subcommand's help:
// the root's flags but TLS and SASL, which one line names.
func globalFlagUsages(cmd *cobra.Command) string {
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	hidden := 0
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[securityFlag]; ok {
			hidden++
			return
		}
		fs.AddFlag(f)
	})
	if hidden > 0 {
		// A line of its own, aligned with the flags.
		fs.Bool("tls*, --sasl-*", false, "TLS and SASL to the cluster: see antidote --help")
	}
	return fs.FlagUsages()
}

func displayPath(p string) string {
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home+string(filepath.Separator)) {
		return "~" + p[len(home):]
	}
	return p
}

func completeContexts(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	path, _ := cmd.Flags().GetString("config")
	cf, err := LoadConfig(cmp.Or(path, DefaultConfigPath()), path != "")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(cf.Contexts))
	for n := range cf.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// Conn is the resolved connection of a command: the flags over the
// environment over the context.
type Conn struct {
	Context string // the context's name, or ""
	Topic   string // the context's default topic
	Opts    []kgo.Opt
	warn    []string // warnings to print once, on stderr
	// Mechanism and TLS describe the connection for error messages.
	Mechanism string
	TLS       bool
}

type connKey struct{}

// ResolveConn resolves the connection flags, the environment and the
// config file. It sets the brokers flag from the context when neither the
// flag nor the environment gave brokers. Errors are usage errors.
func ResolveConn(cmd *cobra.Command) (*Conn, error) {
	fs := cmd.Flags()
	str := func(n string) string { v, _ := fs.GetString(n); return strings.TrimSpace(v) }
	boolean := func(n string) bool { v, _ := fs.GetBool(n); return v }

	path := str("config")
	cf, err := LoadConfig(cmp.Or(path, DefaultConfigPath()), path != "" || os.Getenv(EnvConfig) != "")
	if err != nil {
		return nil, UsageError{err}
	}
	name := cmp.Or(str("context"), os.Getenv(EnvContext), cf.CurrentContext)
	if isDemo(cmd) && str("context") == "" && os.Getenv(EnvContext) == "" {
		// The demo creates topics: it goes to a cluster only when told
		// to, never to the current context by itself.
		name = ""
	}
	var ctx ConnContext
	if name != "" {
		var ok bool
		if ctx, ok = cf.Contexts[name]; !ok {
			names := make([]string, 0, len(cf.Contexts))
			for n := range cf.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, Usagef("context %q is not in the config file %s (it has: %s)", name, cmp.Or(path, DefaultConfigPath()), strings.Join(names, ", "))
		}
	}
	c := &Conn{Context: name, Topic: ctx.Topic}
	if f := fs.Lookup("brokers"); f != nil && !f.Changed && BrokersFromEnv() == nil && len(ctx.Brokers) > 0 {
		if err := fs.Set("brokers", strings.Join(ctx.Brokers, ",")); err != nil {
			return nil, Usagef("context %s: brokers: %v", name, err)
		}
	}

	t := TLSConfig{}
	if ctx.TLS != nil {
		t = *ctx.TLS
	}
	t.CAFile = cmp.Or(str("tls-ca"), t.CAFile)
	t.CertFile = cmp.Or(str("tls-cert"), t.CertFile)
	t.KeyFile = cmp.Or(str("tls-key"), t.KeyFile)
	t.ServerName = cmp.Or(str("tls-server-name"), t.ServerName)
	t.InsecureSkipVerify = t.InsecureSkipVerify || boolean("tls-insecure-skip-verify")
	t.Enabled = t.Enabled || boolean("tls") || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
	if t.Enabled {
		cfg, err := t.Config()
		if err != nil {
			return nil, UsageError{err}
		}
		c.Opts = append(c.Opts, kgo.DialTLSConfig(cfg))
		c.TLS = true
		if t.InsecureSkipVerify {
			c.warn = append(c.warn, "WARNING: TLS certificate verification is OFF (--tls-insecure-skip-verify): anyone on the path can read and change this connection")
		}
	}

	s := SASLConfig{}
	if ctx.SASL != nil {
		s = *ctx.SASL
	}
	s.Mechanism = strings.ToUpper(cmp.Or(str("sasl-mechanism"), s.Mechanism))
	s.Username = cmp.Or(str("sasl-username"), os.Getenv(EnvSASLUsername), s.Username)
	s.PasswordFile = cmp.Or(str("sasl-password-file"), s.PasswordFile)
	s.TokenFile = cmp.Or(str("sasl-token-file"), s.TokenFile)
	if s.Mechanism != "" {
		m, err := s.Auth()
		if err != nil {
			return nil, UsageError{err}
		}
		c.Opts = append(c.Opts, kgo.SASL(m))
		c.Mechanism = s.Mechanism
		if !c.TLS && s.Mechanism == "PLAIN" {
			c.warn = append(c.warn, "WARNING: SASL PLAIN without TLS sends the password in clear (add --tls)")
		}
	}
	return c, nil
}

// isDemo reports whether cmd is the demo or under it.
func isDemo(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "demo" && c.Parent() != nil && c.Parent().Parent() == nil {
			return true
		}
	}
	return false
}

// Config builds the TLS configuration.
func (t TLSConfig) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the user's choice, warned about
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, errors.New("--tls-cert and --tls-key go together: give both for mutual TLS")
	}
	return cfg, nil
}

// secret reads a secret from file, else from the environment variable
// env, and names both when neither has it.
func secret(what, file, fileFlag, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s file: %w", what, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("no SASL %s: put it in a file (%s) or in $%s", what, fileFlag, env)
}

// Auth builds the SASL mechanism. Secrets are read now (PLAIN,
// SCRAM) or at each login (OAUTHBEARER), from a file or the environment.
func (s SASLConfig) Auth() (sasl.Mechanism, error) {
	needUser := func() error {
		if s.Username == "" {
			return fmt.Errorf("SASL %s needs a user name: --sasl-username, $%s or the context's sasl.username", s.Mechanism, EnvSASLUsername)
		}
		return nil
	}
	password := func() (string, error) {
		return secret("password", s.PasswordFile, "--sasl-password-file or the context's sasl.password-file", cmp.Or(s.PasswordEnv, EnvSASLPassword))
	}
	switch s.Mechanism {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if err := needUser(); err != nil {
			return nil, err
		}
		pass, err := password()
		if err != nil {
			return nil, err
		}
		switch s.Mechanism {
		case "PLAIN":
			return plain.Auth{User: s.Username, Pass: pass}.AsMechanism(), nil
		case "SCRAM-SHA-256":
			return scram.Auth{User: s.Username, Pass: pass}.AsSha256Mechanism(), nil
		}
		return scram.Auth{User: s.Username, Pass: pass}.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		if _, err := secret("token", s.TokenFile, "--sasl-token-file or the context's sasl.token-file", cmp.Or(s.TokenEnv, EnvSASLToken)); err != nil {
			return nil, err
		}
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := secret("token", s.TokenFile, "--sasl-token-file", cmp.Or(s.TokenEnv, EnvSASLToken))
			return oauth.Auth{Token: tok}, err
		}), nil
	case "AWS_MSK_IAM":
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
			return nil, errors.New("SASL AWS_MSK_IAM reads the credentials from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN: set them")
		}
		return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
			return aws.Auth{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
		}), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: must be one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", "))
}

// ConnOf returns the connection resolved for cmd (an empty one when the
// root's hook did not run, as in completion).
func ConnOf(cmd *cobra.Command) *Conn {
	if c, ok := cmd.Context().Value(connKey{}).(*Conn); ok {
		return c
	}
	c, err := ResolveConn(cmd)
	if err != nil {
		return &Conn{}
	}
	return c
}

// printWarnings prints the connection's warnings once.
func (c *Conn) printWarnings(w io.Writer) {
	for _, s := range c.warn {
		fmt.Fprintln(w, "antidote: "+s)
	}
	c.warn = nil
}
