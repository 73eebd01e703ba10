// Package run is antidote run: poison-pill-safe consumers from a YAML file
// whose records go to an HTTP service or a topic.
package run

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/console/oidc"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/metrics/prom"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// runOptions are the flags of antidote run.
type runOptions struct {
	file      string
	check     bool
	logFormat string
}

// NewCommand builds antidote run: poison-pill-safe consumers from a YAML
// file, handing their records to an HTTP service or a topic.
func NewCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -c FILE",
		Short: "Run poison-pill-safe consumers from a YAML file: records to an HTTP service or a topic",
		Long: `Run the pipelines of a YAML file: each consumes topics in a group, decodes
the records (decrypt, decompress, then json, string, bytes, avro,
json-schema or protobuf), and hands each record to a sink: an HTTP service (POST, one
record a request, or batches whose answer settles each record), a gRPC
service (antidote.sink.v1.Sink, whose status codes settle each record), another Kafka topic, or OpenSearch or Elasticsearch
(_bulk requests, each record settled from its own item). Failures are settled by the
pipeline's policy: retried in place with backoff, dead-lettered, skipped or
halting. Offsets are committed only past settled records. No Go code is
needed: any service that speaks HTTP gets Antidote's guarantees.

The file is checked before anything starts: an unknown key is an error with
a "did you mean", and every error names the file, the line and the key.
${VAR} and ${file:PATH} in a value are replaced by an environment variable
and by a file's contents (for secrets). With --check, antidote run validates
the file, prints the resolved pipelines and exits, without connecting.

SIGTERM (or one Ctrl-C) drains: in-flight records are abandoned unsettled
(they are redelivered), settled offsets are committed, the consumers leave
their groups, and the exit code is 0. A second Ctrl-C exits at once (130).
A change of the file takes a restart (see examples/README.md).`,
		Example: `  antidote run --check -c antidote.yaml
  antidote run -c antidote.yaml
  antidote run -c antidote.yaml --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.file == "" {
				return cli.Usagef("-c FILE: the pipelines file is required")
			}
			if o.logFormat != "" && o.logFormat != "json" && o.logFormat != "text" {
				return cli.Usagef("--log-format %q: must be text or json", o.logFormat)
			}
			plan, err := loadRunFile(o.file)
			if err != nil {
				return cli.Usage(err) // exit 2, as a bad flag
			}
			if o.check {
				return plan.check(cmd)
			}
			return plan.run(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "c", "", "the pipelines file (YAML)")
	f.BoolVar(&o.check, "check", false, "validate the file, print the resolved pipelines and exit, without connecting")
	f.StringVar(&o.logFormat, "log-format", "", "log format: text or json (default: the file's log.format, else text)")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// runConn is the resolved connection of antidote run.
type runConn struct {
	brokers []string
	opts    []kgo.Opt // TLS, SASL
	desc    string
}

// connection resolves the connection: the file's kafka keys, else the
// file's context, else the command's (flags, environment, --context).
func (p *runPlan) connection(cmd *cobra.Command) (*runConn, error) {
	c := &p.cfg
	if c.Kafka == nil && c.Context == "" {
		g := cli.ReadGlobals(cmd)
		rc := &runConn{brokers: g.Brokers, opts: g.Conn.Opts, desc: "the command's connection"}
		if g.Conn.Context != "" {
			rc.desc = "context " + g.Conn.Context + " of the config file"
		}
		return rc, nil
	}
	k := c.Kafka
	where := "kafka"
	rc := &runConn{desc: "the kafka keys of " + p.file}
	if k == nil {
		path, _ := cmd.Flags().GetString("config")
		path = cmp.Or(path, cli.DefaultConfigPath())
		cf, err := cli.LoadConfig(path, true)
		if err != nil {
			return nil, p.doc.errAt("context", "%v", err)
		}
		ctx, ok := cf.Contexts[c.Context]
		if !ok {
			names := make([]string, 0, len(cf.Contexts))
			for n := range cf.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, p.doc.errAt("context", "%q is not a context of %s (it has: %s)", c.Context, path, strings.Join(names, ", "))
		}
		if len(ctx.Brokers) == 0 {
			return nil, p.doc.errAt("context", "context %q of %s has no brokers", c.Context, path)
		}
		k = &runKafka{Brokers: ctx.Brokers, TLS: ctx.TLS, SASL: ctx.SASL}
		where = "context"
		rc.desc = "context " + c.Context + " of " + path
	}
	rc.brokers = k.Brokers
	if t := k.TLS; t != nil && (t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify) {
		cfg, err := t.Config()
		if err != nil {
			return nil, p.doc.errAt(where+".tls", "%v", err)
		}
		rc.opts = append(rc.opts, kgo.DialTLSConfig(cfg))
		rc.desc += ", TLS"
	}
	if s := k.SASL; s != nil && s.Mechanism != "" {
		sc := *s
		sc.Mechanism = strings.ToUpper(sc.Mechanism)
		m, err := sc.Auth()
		if err != nil {
			return nil, p.doc.errAt(where+".sasl", "%v", err)
		}
		rc.opts = append(rc.opts, kgo.SASL(m))
		rc.desc += ", SASL " + sc.Mechanism
	}
	return rc, nil
}

// check prints the resolved pipelines.
func (p *runPlan) check(cmd *cobra.Command) error {
	rc, err := p.connection(cmd)
	if err != nil {
		return cli.Usage(err)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s: valid\n", p.file)
	fmt.Fprintf(w, "  kafka       %s (%s)\n", strings.Join(rc.brokers, ","), rc.desc)
	if r := p.cfg.SchemaRegistry; r != nil {
		auth := ""
		if r.Username != "" {
			auth = ", basic auth as " + cli.Safe(r.Username)
		}
		fmt.Fprintf(w, "  registry    %s%s\n", redactURLs(r.URL), auth)
	}
	if a := p.cfg.Admin; a != nil {
		tok := "a random token, in a file named at start"
		switch {
		case a.Token != "":
			tok = "the file's token"
		case os.Getenv(admin.EnvToken) != "":
			tok = "$" + admin.EnvToken
		}
		fmt.Fprintf(w, "  admin       http://%s (admin API and /metrics of every pipeline; %s)\n", a.Address, tok)
	}
	for _, pp := range p.pipelines {
		for _, line := range pp.describe() {
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

// redactURLs drops the passwords of comma-separated URLs.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, u := range parts {
		parts[i] = redactURL(strings.TrimSpace(u))
	}
	return strings.Join(parts, ",")
}

// runtime is what antidote run runs: a consumer and a sink per pipeline.
type runtime struct {
	conn      *runConn // the cluster, for the console
	log       *slog.Logger
	reg       *prometheus.Registry
	registry  *avro.Registry
	consumers map[string]*consumer.Consumer[[]byte, []byte]
	order     []string
	sinks     []sink
	admin     string // the admin API's address, "" without one; set before the consumers run
}

// floodHint adds to the consumer's hooks a log line that says how an
// operator of antidote run lets a consumer held by its flood guard go on.
type floodHint struct {
	consumer.Hooks
	log  *slog.Logger
	what func() string
}

func (h floodHint) FloodGuardTripped(f consumer.Flood) {
	h.Hooks.FloodGuardTripped(f)
	h.log.Error("flood guard tripped: fetching is paused; "+h.what(),
		"topic", f.Topic, "partition", f.Partition, "offset", f.Offset, "dead_letters", f.DeadLetters, "records", f.Records, "share", f.Share)
}

// resumeHint says how to let pipeline go on after its flood guard tripped.
func (rt *runtime) resumeHint(pipeline string) string {
	if rt.admin == "" {
		return "add an admin: section to the file to let it go on with antidote ctl flood resume, or restart"
	}
	return fmt.Sprintf("once the cause is fixed, let it go on: antidote ctl --admin http://%s --consumer %s flood resume", rt.admin, pipeline)
}

// fromRegistry reports whether a value or key format reads its schemas
// from the registry.
func fromRegistry(c *runCodec) bool {
	return c != nil && (c.Format == "avro" || c.Format == "json-schema" || c.Format == "protobuf")
}

// sink is where a pipeline hands its records.
type sink interface {
	handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error
	describe() string
	close()
}

// batchSink is a sink that takes a partition's records in batches.
type batchSink interface {
	sink
	handleBatch(ctx context.Context, batch []*consumer.Record[[]byte, []byte]) error
	batching() consumer.Batching
}

// newRunLogger is the logger of antidote run, on w.
func newRunLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cmp.Or(level, "info")))
	o := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// forceExit ends the process on the second interrupt.
var forceExit = func() { os.Exit(cli.ExitInterrupted) }

// watchInterrupts calls force at the second signal on sig, until done.
func watchInterrupts(sig <-chan os.Signal, done <-chan struct{}, log *slog.Logger, force func()) {
	n := 0
	for {
		select {
		case s := <-sig:
			n++
			if n == 1 {
				log.Info("draining: in-flight records are left unsettled, settled offsets are committed; interrupt again to exit at once", "signal", s.String())
				continue
			}
			log.Warn("second signal: exiting at once; records settled since the last commit will be redelivered", "signal", s.String())
			force()
			return
		case <-done:
			return
		}
	}
}

// run runs every pipeline until the command's context ends (SIGTERM,
// Ctrl-C) or one of them halts.
func (p *runPlan) run(cmd *cobra.Command, o runOptions) error {
	rc, err := p.connection(cmd)
	if err != nil {
		return cli.Usage(err)
	}
	log := newRunLogger(cmd.ErrOrStderr(), cmp.Or(o.logFormat, p.cfg.Log.Format), p.cfg.Log.Level)
	ctx := cmd.Context()

	// The first SIGINT or SIGTERM ends ctx (see run in main.go) and drains;
	// a second one forces.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan struct{})
	defer close(done)
	go watchInterrupts(sig, done, log, forceExit)

	rt, err := p.build(rc, log)
	if err != nil {
		return err
	}
	defer rt.close()

	if a := p.cfg.Admin; a != nil {
		stop, err := rt.serveAdmin(a, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed error
	)
	for _, name := range rt.order {
		c := rt.consumers[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Run(runCtx)
			if err != nil {
				mu.Lock()
				if failed == nil {
					failed = fmt.Errorf("pipeline %s: %w", name, err)
				}
				mu.Unlock()
				log.Error("pipeline stopped: stopping the others", "pipeline", name, "err", err)
				cancel() // one pipeline halted: stop them all, the process exits 1
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	log.Info("stopped: settled offsets committed")
	return nil
}

// build makes every pipeline's consumer and sink. Nothing runs yet.
func (p *runPlan) build(rc *runConn, log *slog.Logger) (_ *runtime, err error) {
	rt := &runtime{conn: rc, log: log, reg: prometheus.NewRegistry(), consumers: map[string]*consumer.Consumer[[]byte, []byte]{}}
	if a := p.cfg.Admin; a != nil {
		rt.admin = a.Address
	}
	defer func() {
		if err != nil {
			rt.close()
		}
	}()
	if r := p.cfg.SchemaRegistry; r != nil {
		opts := []avro.Opt{avro.Logger(log)}
		if r.Username != "" {
			opts = append(opts, avro.BasicAuth(r.Username, r.Password))
		}
		if r.CAFile != "" {
			opts = append(opts, avro.CAFile(r.CAFile))
		}
		if r.Timeout > 0 {
			opts = append(opts, avro.Timeout(r.Timeout))
		}
		if rt.registry, err = avro.NewRegistry(r.URL, opts...); err != nil {
			return nil, p.doc.errAt("schema-registry", "%v", err)
		}
	}
	for _, pp := range p.pipelines {
		c, s, err := pp.build(rt, rc, log.With("pipeline", pp.cfg.Name))
		if err != nil {
			return nil, err
		}
		rt.sinks = append(rt.sinks, s)
		rt.consumers[pp.cfg.Name] = c
		rt.order = append(rt.order, pp.cfg.Name)
		log.Info("pipeline ready", "pipeline", pp.cfg.Name, "topics", pp.cfg.Topics, "topic_pattern", pp.cfg.TopicPattern, "group", pp.cfg.Group, "sink", s.describe())
	}
	if rt.registry != nil {
		rt.registry.Breaker().OnStateChange(func(_, to avro.State) {
			if to == avro.Closed {
				for _, c := range rt.consumers {
					c.WakeRetries()
				}
			}
		})
	}
	return rt, nil
}

// build makes the pipeline's sink and consumer.
func (pp *pipelinePlan) build(rt *runtime, rc *runConn, log *slog.Logger) (*consumer.Consumer[[]byte, []byte], sink, error) {
	value, contentType, err := pp.valueDeserializer(rt.registry)
	if err != nil {
		return nil, nil, err
	}
	key, err := pp.keyDeserializer(rt.registry)
	if err != nil {
		return nil, nil, err
	}
	var s sink
	switch {
	case pp.cfg.Sink.GRPC != nil:
		s, err = newGRPCSinkFor(pp.cfg.Sink.GRPC, contentType)
	case pp.cfg.Sink.HTTP != nil && pp.cfg.Sink.HTTP.Batch != nil:
		s, err = newHTTPBatchSink(pp.cfg.Sink.HTTP, contentType)
	case pp.cfg.Sink.HTTP != nil:
		s, err = newHTTPSink(pp.cfg.Sink.HTTP, contentType)
	case pp.cfg.Sink.OpenSearch != nil:
		s, err = newSearchSink("opensearch", pp.cfg.Sink.OpenSearch)
	case pp.cfg.Sink.Elasticsearch != nil:
		s, err = newSearchSink("elasticsearch", pp.cfg.Sink.Elasticsearch)
	default:
		s, err = newKafkaSink(pp.cfg.Sink.Kafka, append([]kgo.Opt{kgo.SeedBrokers(rc.brokers...)}, rc.opts...))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline %s: sink: %w", pp.cfg.Name, err)
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": pp.cfg.Name}, rt.reg)
	m, err := prom.New(reg)
	if err != nil {
		s.close()
		return nil, nil, err
	}
	client := kprom.NewMetrics("antidote", kprom.Subsystem("kafka"), kprom.Registerer(reg))
	cfg := consumer.Config[[]byte, []byte]{
		Brokers:         rc.brokers,
		Topics:          pp.cfg.Topics,
		TopicPattern:    pp.cfg.TopicPattern,
		TopicRefresh:    pp.cfg.TopicRefresh,
		Group:           pp.cfg.Group,
		Key:             key,
		Value:           value,
		Handler:         s.handle,
		Policy:          pp.policy,
		DeadLetter:      pp.dead,
		ClientOpts:      append(append([]kgo.Opt(nil), rc.opts...), kgo.WithHooks(client)),
		CommitInterval:  pp.cfg.CommitInterval,
		Buffer:          pp.buffer,
		GroupProtocol:   pp.protocol,
		Logger:          log,
		DurableAttempts: pp.attempts,
		FloodGuard:      pp.flood,
		RetryTopics:     pp.retry,
		Concurrency:     pp.conc,
		ExactlyOnce:     pp.eos,
		Hooks:           floodHint{Hooks: m, log: log.With("pipeline", pp.cfg.Name), what: func() string { return rt.resumeHint(pp.cfg.Name) }},
	}
	if rt.registry != nil && (fromRegistry(&pp.cfg.Value) || fromRegistry(pp.cfg.Key)) {
		br := rt.registry.Breaker()
		cfg.Dependencies = map[string]func() string{"schema-registry": func() string { return br.State().String() }}
	}
	if pp.share != nil {
		cfg.Group, cfg.ShareGroup, cfg.Share = "", pp.cfg.Group, *pp.share
	} else if bs, ok := s.(batchSink); ok {
		cfg.Handler, cfg.BatchHandler, cfg.Batching = nil, bs.handleBatch, bs.batching()
	}
	c, err := consumer.New(cfg)
	if err != nil {
		s.close()
		return nil, nil, fmt.Errorf("pipeline %s: %w", pp.cfg.Name, err)
	}
	m.Watch(c)
	return c, s, nil
}

// serveAdmin serves the admin API of every pipeline until stop.
func (rt *runtime) serveAdmin(a *runAdmin, log *slog.Logger) (stop func(), err error) {
	cs := make(map[string]admin.Consumer, len(rt.consumers))
	for n, c := range rt.consumers {
		cs[n] = c
	}
	// One token for the admin API and its console (/ui/).
	tok := strings.TrimSpace(a.Token)
	if tok == "" {
		tok = strings.TrimSpace(os.Getenv(admin.EnvToken))
	}
	if tok == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		tok = hex.EncodeToString(b[:])
		// Not in the log, which is often shipped elsewhere: in a file
		// that only this user can read.
		file, err := writeTokenFile(tok)
		if err != nil {
			return nil, fmt.Errorf("admin: no token set, and the generated one could not be kept: %w (set admin.token or %s)", err, admin.EnvToken)
		}
		log.Warn("admin API and console: no token set; generated one for this process, in a file only this user can read (set admin.token or "+admin.EnvToken+" to choose it)", "token_file", file)
	}
	ccfg := console.Config{
		ClientOpts: append([]kgo.Opt{kgo.SeedBrokers(rt.conn.brokers...)}, rt.conn.opts...),
		Consumers:  cs, Token: tok, Prefix: "/ui/", Logger: log, URL: a.URL,
	}
	if o := a.OIDC; o != nil {
		login, err := cli.OIDCLogin(context.Background(), oidc.Config{
			Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, RoleClaim: o.RoleClaim,
			Operators: o.Operators, Viewers: o.Viewers, Label: o.Label,
		}, o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("admin.oidc: %w", err)
		}
		ccfg.Login = login
	}
	con, err := console.New(ccfg)
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if t := a.TLS; t != nil {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			con.Close()
			return nil, fmt.Errorf("admin.tls: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	h, err := admin.New(admin.Config{
		TLS:         tlsCfg,
		Consumers:   cs,
		Token:       tok,
		Console:     con,
		Metrics:     promhttp.HandlerFor(rt.reg, promhttp.HandlerOpts{}),
		OpenReads:   a.OpenReads,
		AllowRemote: a.AllowRemote,
		Logger:      log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := h.Listen(a.Address)
	if err != nil {
		return nil, fmt.Errorf("admin.address %s: %w", a.Address, err)
	}
	rt.admin = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.Serve(ctx, ln)
	}()
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	log.Info("admin API and /metrics", "url", scheme+ln.Addr().String(), "pipelines", rt.order)
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		con.Close()
	}, nil
}

func (rt *runtime) close() {
	for _, c := range rt.consumers {
		c.Close()
	}
	for _, s := range rt.sinks {
		s.close()
	}
}

// writeTokenFile writes a generated token to a new file of a new folder
// that only this user can read, and returns its path.
func writeTokenFile(tok string) (string, error) {
	dir, err := os.MkdirTemp("", "antidote-admin-")
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return file, nil
}
