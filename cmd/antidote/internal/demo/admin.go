package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/metrics/prom"
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
		Consumers:  map[string]admin.Consumer{"demo": c},
		Token:      tok, Prefix: "/ui/", Logger: log,
	})
	if err != nil {
		return err
	}
	h, err := admin.New(admin.Config{
		Consumers: map[string]admin.Consumer{"demo": c},
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
	fmt.Fprintln(w, "\nThe admin API remains available (the consumer has stopped; its last Stats and metrics remain):")
	for _, line := range a.hint() {
		fmt.Fprintln(w, line)
	}
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
