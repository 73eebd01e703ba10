package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Globals are the root's persistent flags, as seen by a subcommand.
type Globals struct {
	Brokers []string
	// Explicit is true when the brokers came from --brokers or the
	// environment rather than the default.
	Explicit bool
	Output   string
	Timeout  time.Duration
	Conn     *Conn
	Stderr   io.Writer
}

func ReadGlobals(cmd *cobra.Command) Globals {
	fs := cmd.Flags()
	g := Globals{}
	g.Brokers, _ = fs.GetStringSlice("brokers")
	for i, b := range g.Brokers {
		g.Brokers[i] = strings.TrimSpace(b)
	}
	if f := fs.Lookup("brokers"); f != nil {
		g.Explicit = f.Changed
	}
	g.Output, _ = fs.GetString("output")
	g.Timeout, _ = fs.GetDuration("timeout")
	g.Conn = ConnOf(cmd)
	g.Stderr = cmd.ErrOrStderr()
	return g
}

func (g Globals) JSON() bool { return g.Output == "json" }

// Dial connects to the cluster the global flags, the environment and the
// context name, with their TLS and SASL (see DialCluster). When no broker
// answers for a few seconds, it says so on stderr rather than wait in
// silence, and the error names the last reason a connection failed.
func (g Globals) Dial(ctx context.Context, opts ...kgo.Opt) (*kgo.Client, error) {
	var (
		mu      sync.Mutex
		lastErr error
	)
	// A refused login or a certificate that does not verify will not
	// change by waiting: the dial ends at once.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	hook := dialHook(func(addr string, err error) {
		mu.Lock()
		defer mu.Unlock()
		lastErr = fmt.Errorf("%s: %w", addr, err)
		if fatalConnErr(err) {
			dcancel()
		}
	})
	var copts []kgo.Opt
	if g.Conn != nil {
		copts = append(copts, g.Conn.Opts...)
	}
	copts = append(append(copts, kgo.WithHooks(hook)), opts...)
	if g.Stderr != nil && g.Timeout > 5*time.Second {
		done := make(chan struct{})
		var notice sync.WaitGroup
		notice.Add(1)
		go func() {
			defer notice.Done()
			t := time.NewTimer(3 * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
				fmt.Fprintf(g.Stderr, "antidote: no answer yet from %s; waiting up to %v (--timeout)\n", strings.Join(g.Brokers, ","), g.Timeout)
			case <-done:
			}
		}()
		defer func() {
			close(done)
			notice.Wait()
		}()
	}
	cl, err := DialCluster(dctx, g.Brokers, g.Timeout, copts...)
	if err != nil && ctx.Err() == nil {
		mu.Lock()
		defer mu.Unlock()
		if lastErr != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			return nil, Unreachable(g.Brokers, g.Timeout, lastErr)
		}
	}
	return cl, err
}

// fatalConnErr reports whether a connection error is one that retrying
// does not mend: a refused login, a certificate that does not verify, a
// listener that speaks no TLS.
func fatalConnErr(err error) bool {
	var (
		certErr  *tls.CertificateVerificationError
		recErr   tls.RecordHeaderError
		unknownA x509.UnknownAuthorityError
	)
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.As(err, &certErr) || errors.As(err, &unknownA) || errors.As(err, &recErr)
}

// dialHook records the errors of connections to brokers.
type dialHook func(addr string, err error)

func (h dialHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h(net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err)
	}
}

func (h dialHook) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if err := e2e.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		h(net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err)
	}
}

var (
	_ kgo.HookBrokerConnect = dialHook(nil)
	_ kgo.HookBrokerE2E     = dialHook(nil)
)

// CompleteTopics completes topic names from the cluster, within two
// seconds; nothing when it cannot be reached.
func CompleteTopics(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	g := ReadGlobals(cmd)
	g.Stderr = nil
	if f := cmd.Flags().Lookup("brokers"); f != nil && !f.Changed {
		if env := BrokersFromEnv(); env != nil {
			g.Brokers = env
		}
	}
	g.Timeout = min(g.Timeout, 2*time.Second)
	ctx, cancel := context.WithTimeout(cmd.Context(), g.Timeout)
	defer cancel()
	cl, err := g.Dial(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, toComplete) {
			out = append(out, t)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// DialCluster creates a client on brokers and checks, within timeout, that
// the cluster answers a metadata request. The error of an unreachable
// cluster names the brokers and the bound.
func DialCluster(ctx context.Context, brokers []string, timeout time.Duration, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DialTimeout(min(timeout, 10*time.Second)),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := kadm.NewClient(cl).BrokerMetadata(mctx); err != nil {
		cl.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, Unreachable(brokers, timeout, err)
	}
	return cl, nil
}

func Unreachable(brokers []string, timeout time.Duration, err error) error {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "no answer"
	}
	var (
		certErr  *tls.CertificateVerificationError
		recErr   tls.RecordHeaderError
		unknownA x509.UnknownAuthorityError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.IllegalSaslState) || errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("the login to Kafka at %s was refused: %s (check --sasl-mechanism, the user and the password)", strings.Join(brokers, ","), msg)
	case errors.As(err, &certErr) || errors.As(err, &unknownA):
		return fmt.Errorf("TLS with Kafka at %s failed: %s (--tls-ca names the authority that signed the brokers' certificates)", strings.Join(brokers, ","), msg)
	case errors.As(err, &recErr):
		return fmt.Errorf("TLS with Kafka at %s failed: %s (does that listener speak TLS?)", strings.Join(brokers, ","), msg)
	}
	within := "" // a refused connection fails at once: "within 30s" would mislead
	if errors.Is(err, context.DeadlineExceeded) {
		within = fmt.Sprintf(" within %v", timeout)
	}
	return fmt.Errorf("cannot reach Kafka at %s%s: %s (is a broker running there? set --brokers, %s or a --context)",
		strings.Join(brokers, ","), within, msg, EnvBrokers)
}

// ErrNoTopic is wrapped by the error of [TopicPartitions] for a topic that
// does not exist.
var ErrNoTopic = errors.New("no such topic")

// TopicPartitions returns the partition count of topic, or a clear error
// when it does not exist.
func TopicPartitions(ctx context.Context, adm *kadm.Client, brokers []string, timeout time.Duration, topic string) (int32, error) {
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	md, err := adm.Metadata(mctx, topic)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("metadata of topic %q: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("topic %q does not exist on %s: %w", topic, strings.Join(brokers, ","), ErrNoTopic)
	}
	if td.Err != nil {
		return 0, fmt.Errorf("topic %q: %w", topic, td.Err)
	}
	return int32(len(td.Partitions)), nil
}
