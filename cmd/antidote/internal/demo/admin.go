package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/metrics/prom"
	"github.com/antidote-kafka/antidote/serde"
)

// demoAdmin is the admin API and /metrics of the demo (--admin).
type demoAdmin struct {
	addr    string // what --admin asked for
	reg     *prometheus.Registry
	metrics *prom.Metrics
	client  *kprom.Metrics
	ln      net.Listener
	token   string
	console *console.Handler
	stop    context.CancelFunc
	done    chan struct{}
	current forward // the consumer the admin API and the console act on
}

// forward is an admin.Consumer that forwards to the consumer it holds:
// the demo's, then, with --keep, the one that stays up after it.
type forward struct {
	c atomic.Pointer[admin.Consumer]
}

func (f *forward) get() admin.Consumer                   { return *f.c.Load() }
func (f *forward) set(c admin.Consumer)                  { f.c.Store(&c) }
func (f *forward) Stats() consumer.Stats                 { return f.get().Stats() }
func (f *forward) SetRetryEnabled(on bool)               { f.get().SetRetryEnabled(on) }
func (f *forward) RetryEnabled() bool                    { return f.get().RetryEnabled() }
func (f *forward) Pause(t string, p int32) error         { return f.get().Pause(t, p) }
func (f *forward) Resume(t string, p int32) error        { return f.get().Resume(t, p) }
func (f *forward) ResumeFlood() error                    { return f.get().ResumeFlood() }
func (f *forward) Skip(t string, p int32, o int64) error { return f.get().Skip(t, p, o) }
func (f *forward) DeadLetter(t string, p int32, o int64, who string) error {
	return f.get().DeadLetter(t, p, o, who)
}

// checkAdminAddr validates --admin before anything starts: a loopback
// host:port.
func checkAdminAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usagef("--admin %q: want HOST:PORT, for example 127.0.0.1:9180", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return cli.Usagef("--admin %q: the demo serves its admin API on a loopback address only, for example 127.0.0.1:9180", addr)
	}
	return nil
}

// newDemoAdmin creates the metrics (the consumer's hooks and client hooks)
// when addr is set; nil otherwise.
func newDemoAdmin(addr string) (*demoAdmin, error) {
	if addr == "" {
		return nil, nil
	}
	a := &demoAdmin{addr: addr, reg: prometheus.NewRegistry()}
	var err error
	if a.metrics, err = prom.New(a.reg); err != nil {
		return nil, err
	}
	a.client = kprom.NewMetrics("antidote", kprom.Subsystem("kafka"), kprom.Registerer(a.reg))
	return a, nil
}

// hooks returns the consumer's hooks, nil without --admin.
func (a *demoAdmin) hooks() consumer.Hooks {
	if a == nil {
		return nil
	}
	return a.metrics
}

// clientOpt returns the client option of franz-go's metrics (no hooks
// without --admin).
func (a *demoAdmin) clientOpt() kgo.Opt {
	if a == nil {
		return kgo.WithHooks()
	}
	return kgo.WithHooks(a.client)
}

// start serves the admin API for c until close, with the web console under
// /ui/ (on the cluster of brokers), and prints where and how to reach it.
func (a *demoAdmin) start(c admin.Consumer, brokers []string, log *slog.Logger, l *cli.Live, stderr io.Writer) error {
	if a == nil {
		return nil
	}
	print := l.Event
	if l == nil { // -o json off a terminal: stdout is for the JSON
		print = func(s string) { fmt.Fprintln(stderr, s) }
	}
	a.metrics.Watch(c)
	a.current.set(c)
	// One token for the admin API and the console, printed below.
	tok := strings.TrimSpace(os.Getenv(admin.EnvToken))
	if tok == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		tok = hex.EncodeToString(b[:])
	}
	var err error
	a.console, err = console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)},
		Consumers:  map[string]admin.Consumer{"demo": &a.current},
		Token:      tok, Prefix: "/ui/", Logger: log,
	})
	if err != nil {
		return err
	}
	h, err := admin.New(admin.Config{
		Consumers: map[string]admin.Consumer{"demo": &a.current},
		Metrics:   promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}),
		Token:     tok,
		Console:   a.console,
		Logger:    log,
	})
	if err != nil {
		return err
	}
	if a.ln, err = h.Listen(a.addr); err != nil {
		return fmt.Errorf("--admin %s: %w", a.addr, err)
	}
	a.token = h.Token()
	ctx, stop := context.WithCancel(context.Background())
	a.stop, a.done = stop, make(chan struct{})
	go func() {
		defer close(a.done)
		_ = h.Serve(ctx, a.ln)
	}()
	for _, line := range a.hint() {
		print(line)
	}
	return nil
}

// hint is what the demo prints about the admin API: commands that work
// when pasted.
func (a *demoAdmin) hint() []string {
	u := "http://" + a.ln.Addr().String()
	return []string{
		fmt.Sprintf("  admin API and /metrics at %s (token %s)", u, a.token),
		fmt.Sprintf("    web console: %s/ui/ (log in with the token)", u),
		fmt.Sprintf("    antidote ctl --admin %s --token %s status", u, a.token),
		fmt.Sprintf("    curl -s -H 'Authorization: Bearer %s' %s/metrics | grep ^antidote_records", a.token, u),
	}
}

// keepHint prints the hint again for --keep, when the admin API stays up.
func (a *demoAdmin) keepHint(stdout, stderr io.Writer, asJSON bool) {
	if a == nil || a.ln == nil {
		return
	}
	w := stdout
	if asJSON {
		w = stderr
	}
	fmt.Fprintln(w, "\nThe admin API remains available, on a consumer of the demo's group that stays up (/metrics keep the demo's counts):")
	for _, line := range a.hint() {
		fmt.Fprintln(w, line)
	}
}

// stuckKey is the key of a record the consumer that stays up after the
// demo fails on, transiently, for ever: an operator can see it stuck and
// skip it.
const stuckKey = "stuck"

// keepConsumer starts, for --keep with --admin, a consumer of the demo's
// topic and group that stays up until ctx ends, and points the admin API
// and the console at it, so that ctl pause, resume and skip act on a
// running consumer. It processes every record but those of key stuckKey,
// which fail transiently until an operator skips them. It returns when
// the consumer is running; wait returns when it has stopped.
func (a *demoAdmin) keepConsumer(ctx context.Context, brokers []string, topic, group string, log *slog.Logger) (wait func(), err error) {
	if a == nil || a.ln == nil {
		return func() {}, nil
	}
	c, err := consumer.New(consumer.Config[string, []byte]{
		Brokers: brokers, Topics: []string{topic}, Group: group,
		Key: serde.String(), Value: serde.Bytes(),
		Handler: func(_ context.Context, r *consumer.Record[string, []byte]) error {
			if r.Key == stuckKey {
				return failure.Transient(errors.New("the demo fails on records of key " + stuckKey + " until you skip them"))
			}
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.Exponential{Initial: 200 * time.Millisecond, Max: 2 * time.Second}},
		}},
		CommitInterval: time.Second,
		ClientOpts:     []kgo.Opt{kgo.ClientID("antidote-demo-kept"), kgo.FetchMaxWait(500 * time.Millisecond)},
		Logger:         log,
	})
	if err != nil {
		return nil, fmt.Errorf("the consumer that stays up: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	a.current.set(c)
	return func() { <-done; c.Close() }, nil
}

// keepHintStuck says how to try skip on the consumer that stays up.
func (a *demoAdmin) keepHintStuck(w io.Writer, self, brokers, topic string) {
	if a == nil || a.ln == nil {
		return
	}
	u := "http://" + a.ln.Addr().String()
	fmt.Fprintf(w, "  It fails on records of key %s until they are skipped: produce one, then see it stuck and skip it:\n", stuckKey)
	fmt.Fprintf(w, "    %s poison --brokers %s --topic %s --kind empty --key %s\n", self, brokers, topic, stuckKey)
	fmt.Fprintf(w, "    %s ctl --admin %s --token %s status      # then: ctl skip TOPIC PARTITION OFFSET, pause, resume\n", self, u, a.token)
}

// close stops the server.
func (a *demoAdmin) close() {
	if a == nil || a.stop == nil {
		return
	}
	a.stop()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
	}
	a.console.Close()
}
