package run

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
)

// runFile is the file of antidote run. Every key is documented in
// examples/README.md; an unknown key is an error.
type runFile struct {
	// Kafka is the connection: the keys of a context of the antidote config
	// file. Optional: without it, the command's connection (the flags, the
	// environment, the --context of the config file).
	Kafka *runKafka `yaml:"kafka"`
	// Context names a context of the antidote config file to connect with.
	Context string `yaml:"context"`
	// SchemaRegistry serves the avro and json-schema formats.
	SchemaRegistry *runRegistry `yaml:"schema-registry"`
	// Log chooses the log format and level.
	Log runLog `yaml:"log"`
	// Admin serves the admin API and /metrics of every pipeline.
	Admin *runAdmin `yaml:"admin"`
	// Pipelines are the consumers. Required: at least one.
	Pipelines []runPipeline `yaml:"pipelines"`
}

// runKafka has the keys of a context (connContext) but topic, which only
// the dlq commands read.
type runKafka struct {
	Brokers []string        `yaml:"brokers"`
	TLS     *cli.TLSConfig  `yaml:"tls"`
	SASL    *cli.SASLConfig `yaml:"sasl"`
}

type runRegistry struct {
	URL      string        `yaml:"url"`
	Username string        `yaml:"username"`
	Password string        `yaml:"password"`
	CAFile   string        `yaml:"ca-file"`
	Timeout  time.Duration `yaml:"timeout"`
}

type runLog struct {
	Format string `yaml:"format"` // text (default) or json
	Level  string `yaml:"level"`  // debug, info (default), warn, error
}

type runAdmin struct {
	Address     string       `yaml:"address"`
	Token       string       `yaml:"token"`
	OpenReads   bool         `yaml:"open-reads"`
	AllowRemote bool         `yaml:"allow-remote"`
	TLS         *runAdminTLS `yaml:"tls"`
	// URL is the console's URL as browsers reach it (…/ui/).
	URL  string        `yaml:"url"`
	OIDC *runAdminOIDC `yaml:"oidc"`
}

// runAdminOIDC is the console's login through an OpenID Connect provider.
type runAdminOIDC struct {
	Issuer       string   `yaml:"issuer"`
	ClientID     string   `yaml:"client-id"`
	ClientSecret string   `yaml:"client-secret"`
	RoleClaim    string   `yaml:"role-claim"`
	Operators    []string `yaml:"operators"`
	Viewers      []string `yaml:"viewers"`
	CAFile       string   `yaml:"ca-file"`
	Label        string   `yaml:"label"`
}

// runAdminTLS is the certificate the admin API and its console serve
// HTTPS with: required on an address other than loopback.
type runAdminTLS struct {
	CertFile string `yaml:"cert-file"`
	KeyFile  string `yaml:"key-file"`
}

type runPipeline struct {
	Name           string          `yaml:"name"`
	Topics         []string        `yaml:"topics"`
	TopicPattern   string          `yaml:"topic-pattern"` // instead of topics (consumer.Config.TopicPattern)
	TopicRefresh   time.Duration   `yaml:"topic-refresh"`
	Group          string          `yaml:"group"`
	GroupProtocol  string          `yaml:"group-protocol"`
	GroupType      string          `yaml:"group-type"` // consumer (default) or share
	Share          *runShare       `yaml:"share"`
	Value          runCodec        `yaml:"value"`
	Key            *runCodec       `yaml:"key"` // decode the key too; without it the key goes as it is
	Sink           runSink         `yaml:"sink"`
	Policy         runPolicy       `yaml:"policy"`
	DeadLetter     runDeadLetter   `yaml:"dead-letter"`
	CommitInterval time.Duration   `yaml:"commit-interval"`
	FloodGuard     *runFloodGuard  `yaml:"flood-guard"`
	Buffer         runBuffer       `yaml:"buffer"`
	Attempts       *runAttempts    `yaml:"durable-attempts"`
	RetryTopics    *runRetryTopics `yaml:"retry-topics"`
	Concurrency    *runConcurrency `yaml:"concurrency"`
}

// runShare configures a share-group member (consumer.Share).
type runShare struct {
	DeliveryLimit int  `yaml:"delivery-limit"`
	FromEarliest  bool `yaml:"from-earliest"`
	MaxRecords    int  `yaml:"max-records"`
}

// runRetryTopics are the delay tiers of the policy slots whose then is
// retry-topics (consumer.RetryTopics).
type runRetryTopics struct {
	Tiers     []time.Duration `yaml:"tiers"`
	Topic     string          `yaml:"topic"`
	Then      string          `yaml:"then"` // after the last tier: dead-letter (default), skip, halt
	Unordered bool            `yaml:"unordered"`
	MaxParked int             `yaml:"max-parked"`
}

// runConcurrency is keyed concurrency (consumer.Concurrency).
type runConcurrency struct {
	Max        int   `yaml:"max"`
	Unordered  bool  `yaml:"unordered"`
	Ahead      int   `yaml:"ahead"`
	AheadBytes int64 `yaml:"ahead-bytes"`
}

type runCodec struct {
	Format     string     `yaml:"format"`
	Stages     []runStage `yaml:"stages"`
	SchemaFile string     `yaml:"schema-file"`
	Message    string     `yaml:"message"` // protobuf: the only message accepted
}

type runStage struct {
	Type        string            `yaml:"type"`
	MaxSize     int64             `yaml:"max-size"`
	Keys        map[string]string `yaml:"keys"`
	KeyIDHeader string            `yaml:"key-id-header"`
}

type runSink struct {
	HTTP          *runHTTP      `yaml:"http"`
	Kafka         *runKafkaSink `yaml:"kafka"`
	OpenSearch    *runSearch    `yaml:"opensearch"`    // opensearch.go
	Elasticsearch *runSearch    `yaml:"elasticsearch"` // the same sink, for Elasticsearch
	GRPC          *runGRPC      `yaml:"grpc"`          // grpc.go
}

type runHTTP struct {
	URL         string            `yaml:"url"`
	Timeout     time.Duration     `yaml:"timeout"`
	Concurrency int               `yaml:"concurrency"`
	Headers     map[string]string `yaml:"headers"`
	TLS         *cli.TLSConfig    `yaml:"tls"`
	Batch       *runHTTPBatch     `yaml:"batch"` // httpbatch.go: many records per request
}

type runKafkaSink struct {
	Topic       string          `yaml:"topic"`
	Value       string          `yaml:"value"` // raw (default) or decoded
	ExactlyOnce *runExactlyOnce `yaml:"exactly-once"`
}

// runExactlyOnce writes the forwarded records in the transactions that
// commit the source offsets (consumer.ExactlyOnce).
type runExactlyOnce struct {
	TransactionalID string        `yaml:"transactional-id"`
	MaxRecords      int           `yaml:"max-records"`
	Interval        time.Duration `yaml:"interval"`
}

type runPolicy struct {
	Deserialize runStagePolicy `yaml:"deserialize"`
	Process     runStagePolicy `yaml:"process"`
}

type runStagePolicy struct {
	Transient    *runOutcome `yaml:"transient"`
	Permanent    *runOutcome `yaml:"permanent"`
	Unclassified *runOutcome `yaml:"unclassified"`
}

type runOutcome struct {
	Retry *runBackoff `yaml:"retry"`
	Then  string      `yaml:"then"` // dead-letter, skip, halt
}

type runBackoff struct {
	Initial    time.Duration `yaml:"initial"`
	Multiplier float64       `yaml:"multiplier"`
	Max        time.Duration `yaml:"max"`
	Jitter     string        `yaml:"jitter"`   // full (default), equal, none
	Attempts   int           `yaml:"attempts"` // tries in all, the first included; 0: no limit
	MaxElapsed time.Duration `yaml:"max-elapsed"`
}

type runDeadLetter struct {
	Topic        string        `yaml:"topic"`
	Create       *bool         `yaml:"create"`
	Unwritable   string        `yaml:"unwritable"` // wait (default), halt, skip
	WriteTimeout time.Duration `yaml:"write-timeout"`
}

type runFloodGuard struct {
	Disable bool    `yaml:"disable"`
	Window  int     `yaml:"window"`
	Share   float64 `yaml:"share"`
	Min     int     `yaml:"min"`
	Halt    bool    `yaml:"halt"`
}

type runBuffer struct {
	PartitionRecords int   `yaml:"partition-records"`
	PartitionBytes   int64 `yaml:"partition-bytes"`
	TotalRecords     int   `yaml:"total-records"`
	TotalBytes       int64 `yaml:"total-bytes"`
}

type runAttempts struct {
	Disable bool   `yaml:"disable"`
	Topic   string `yaml:"topic"`
}

// Formats and stages the file can name.
var (
	runFormats    = []string{"json", "string", "bytes", "avro", "json-schema", "protobuf"}
	runStageTypes = []string{"gzip", "zstd", "aes-gcm"}
	runActions    = []string{"dead-letter", "skip", "halt", "retry-topics"}
	pipelineName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// Defaults of the HTTP sink.
const (
	defaultHTTPTimeout     = 10 * time.Second
	defaultHTTPConcurrency = 64
)

// runPlan is a validated file: what antidote run will do, built without
// connecting to anything.
type runPlan struct {
	file      string
	doc       *yamlDoc
	cfg       runFile
	pipelines []*pipelinePlan
}

// pipelinePlan is one validated pipeline.
type pipelinePlan struct {
	index     int
	path      string // "pipelines[0]"
	cfg       *runPipeline
	policy    consumer.Policy
	dead      consumer.DeadLetterConfig
	flood     consumer.FloodGuard
	buffer    consumer.BufferLimits
	attempts  consumer.DurableAttempts
	protocol  consumer.GroupProtocol
	share     *consumer.Share // a share group's member, nil for a consumer group
	retry     consumer.RetryTopics
	conc      consumer.Concurrency
	eos       consumer.ExactlyOnce      // the kafka sink's exactly-once
	keys      map[int]map[string][]byte // aes-gcm keys by stage index
	schema    string                    // the avro reader schema
	keySchema string                    // the key's avro reader schema
}

// loadRunFile reads and validates the file of antidote run.
func loadRunFile(path string) (*runPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	return parseRunFile(path, b, nil, nil)
}

// parseRunFile validates b, the contents of file. getenv and readFile
// replace os.LookupEnv and os.ReadFile when set.
func parseRunFile(file string, b []byte, getenv func(string) (string, bool), readFile func(string) ([]byte, error)) (*runPlan, error) {
	p := &runPlan{file: file, doc: newYAMLDoc(file)}
	if getenv != nil {
		p.doc.getenv = getenv
	}
	if readFile != nil {
		p.doc.readFile = readFile
	}
	if err := p.doc.decode(b, &p.cfg); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// validate checks the file and resolves its pipelines. It reports the
// first error of the top-level sections and the first of each pipeline,
// so that one --check shows what to fix across the file.
func (p *runPlan) validate() error {
	d, c := p.doc, &p.cfg
	var errs []error
	if err := p.validateTop(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Pipelines) == 0 {
		errs = append(errs, d.errAt("pipelines", "required: at least one pipeline"))
	}
	names := map[string]int{}
	for i := range c.Pipelines {
		pp, err := p.validatePipeline(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if j, dup := names[pp.cfg.Name]; dup {
			errs = append(errs, d.errAt(pp.path+".name", "%q is also the name of pipelines[%d]: names are unique", pp.cfg.Name, j))
			continue
		}
		names[pp.cfg.Name] = i
		p.pipelines = append(p.pipelines, pp)
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fileErrors(errs)
}

// fileErrors are several errors of one file, each with its line.
type fileErrors []error

func (e fileErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("%d errors: %s", len(e), strings.Join(msgs, "; "))
}

func (e fileErrors) Unwrap() []error { return e }

// validateTop checks the sections other than the pipelines.
func (p *runPlan) validateTop() error {
	d, c := p.doc, &p.cfg
	if c.Kafka != nil && c.Context != "" {
		return d.errAt("context", "give the connection once: kafka or context, not both")
	}
	if c.Kafka != nil {
		if len(c.Kafka.Brokers) == 0 {
			return d.errAt("kafka.brokers", "required: the seed brokers, host:port")
		}
		for i, b := range c.Kafka.Brokers {
			if err := checkHostPort(b); err != nil {
				return d.errAt(fmt.Sprintf("kafka.brokers[%d]", i), "%v", err)
			}
		}
		if s := c.Kafka.SASL; s != nil && s.Mechanism != "" {
			if err := d.choice("kafka.sasl.mechanism", strings.ToUpper(s.Mechanism), cli.SASLMechanisms...); err != nil {
				return err
			}
		}
	}
	if c.Log.Format != "" {
		if err := d.choice("log.format", c.Log.Format, "text", "json"); err != nil {
			return err
		}
	}
	if c.Log.Level != "" {
		if err := d.choice("log.level", c.Log.Level, "debug", "info", "warn", "error"); err != nil {
			return err
		}
	}
	if a := c.Admin; a != nil {
		if a.Address == "" {
			return d.errAt("admin.address", "required: HOST:PORT, for example 127.0.0.1:9180")
		}
		if err := checkHostPort(a.Address); err != nil {
			return d.errAt("admin.address", "%v", err)
		}
		host, _, _ := net.SplitHostPort(a.Address)
		if ip := net.ParseIP(host); !a.AllowRemote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return d.errAt("admin.address", "%q is not a loopback address: the admin API controls the consumers, so set allow-remote: true (and keep the token secret) to serve it there", a.Address)
		}
		if o := a.OIDC; o != nil {
			if err := checkURL(o.Issuer); err != nil {
				return d.errAt("admin.oidc.issuer", "the provider's issuer URL: %v", err)
			}
			if o.ClientID == "" {
				return d.errAt("admin.oidc.client-id", "required: the console's client at the provider")
			}
			if len(o.Operators) == 0 && len(o.Viewers) == 0 {
				return d.errAt("admin.oidc", "operators or viewers is required: the groups (role-claim values) whose users are operators or viewers")
			}
		}
		if a.URL != "" {
			if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.HasSuffix(u.Path, "/ui/") {
				return d.errAt("admin.url", "%q: want the console's URL as browsers reach it, such as https://antidote.example:9180/ui/", a.URL)
			}
		}
		if t := a.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "") {
			return d.errAt("admin.tls", "cert-file and key-file are both required: the PEM files of the certificate and its key")
		}
		// An empty host listens on 127.0.0.1 (admin.Handler.Listen).
		if ip := net.ParseIP(host); a.TLS == nil && host != "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return d.errAt("admin.address", "%q is not a loopback address: the console under /ui/ is served there over TLS only (its logins and session cookies would cross the network in the clear); set admin.tls.cert-file and admin.tls.key-file", a.Address)
		}
	}
	if r := c.SchemaRegistry; r != nil {
		if r.URL == "" {
			return d.errAt("schema-registry.url", "required")
		}
		for i, u := range strings.Split(r.URL, ",") {
			if err := checkURL(u); err != nil {
				return d.errAt("schema-registry.url", "URL %d: %v", i+1, err)
			}
		}
		if (r.Username == "") != (r.Password == "") {
			return d.errAt("schema-registry.username", "username and password go together")
		}
		if r.Timeout < 0 {
			return d.errAt("schema-registry.timeout", "negative")
		}
	}
	return nil
}

func (p *runPlan) validatePipeline(i int) (*pipelinePlan, error) {
	d := p.doc
	c := &p.cfg.Pipelines[i]
	pp := &pipelinePlan{index: i, path: fmt.Sprintf("pipelines[%d]", i), cfg: c}
	at := func(k string) string { return pp.path + "." + k }
	if c.Name == "" {
		return nil, d.errAt(at("name"), "required: a name for logs, metrics and the admin API")
	}
	if !pipelineName.MatchString(c.Name) {
		return nil, d.errAt(at("name"), "%q: letters, digits, '.', '_' and '-' only, at most 64", cli.Safe(c.Name))
	}
	switch {
	case c.TopicPattern != "" && len(c.Topics) > 0:
		return nil, d.errAt(at("topic-pattern"), "set with topics: choose one")
	case c.TopicPattern != "":
		if _, err := regexp.Compile(c.TopicPattern); err != nil {
			return nil, d.errAt(at("topic-pattern"), "not a regular expression: %v", err)
		}
		if c.RetryTopics != nil {
			return nil, d.errAt(at("topic-pattern"), "retry-topics needs the topics named: use topics")
		}
	case len(c.Topics) == 0:
		return nil, d.errAt(at("topics"), "required: the topics to consume (or a topic-pattern)")
	}
	if c.TopicRefresh < 0 || (c.TopicRefresh > 0 && c.TopicRefresh < 100*time.Millisecond) {
		return nil, d.errAt(at("topic-refresh"), "%v: at least 100ms", c.TopicRefresh)
	}
	if c.TopicRefresh > 0 && c.TopicPattern == "" {
		return nil, d.errAt(at("topic-refresh"), "only with topic-pattern")
	}
	for j, t := range c.Topics {
		if err := checkTopic(t); err != nil {
			return nil, d.errAt(fmt.Sprintf("%s[%d]", at("topics"), j), "%v", err)
		}
	}
	if c.Group == "" {
		return nil, d.errAt(at("group"), "required: the consumer group")
	}
	switch c.GroupProtocol {
	case "", "classic":
		pp.protocol = consumer.GroupClassic
	case "consumer":
		pp.protocol = consumer.GroupConsumer
	default:
		return nil, d.choice(at("group-protocol"), c.GroupProtocol, "classic", "consumer")
	}
	if err := p.validateCodec(pp); err != nil {
		return nil, err
	}
	if err := p.validateSink(pp); err != nil {
		return nil, err
	}
	if err := p.validateShare(pp); err != nil {
		return nil, err
	}
	var err error
	if pp.policy, err = p.policy(pp); err != nil {
		return nil, err
	}
	if err := p.validateRetryTopics(pp); err != nil {
		return nil, err
	}
	if cc := c.Concurrency; cc != nil {
		switch {
		case cc.Max < 1:
			return nil, d.errAt(at("concurrency.max"), "at least 1 (1: one record at a time per partition)")
		case cc.Ahead < 0:
			return nil, d.errAt(at("concurrency.ahead"), "negative")
		case cc.Ahead > 0 && cc.Ahead < cc.Max:
			return nil, d.errAt(at("concurrency.ahead"), "%d: less than max (%d)", cc.Ahead, cc.Max)
		case cc.AheadBytes < 0:
			return nil, d.errAt(at("concurrency.ahead-bytes"), "negative")
		}
		pp.conc = consumer.Concurrency{Max: cc.Max, Unordered: cc.Unordered, Ahead: cc.Ahead, AheadBytes: cc.AheadBytes}
	}
	dl := c.DeadLetter
	pp.dead.Topic = deadletter.Template(dl.Topic)
	if err := pp.dead.Topic.Validate(); err != nil {
		return nil, d.errAt(at("dead-letter.topic"), "%v", err)
	}
	if dl.Create != nil {
		pp.dead.DisableTopicCreation = !*dl.Create
	}
	switch dl.Unwritable {
	case "", "wait":
		pp.dead.Unwritable = consumer.UnwritableWait
	case "halt":
		pp.dead.Unwritable = consumer.UnwritableHalt
	case "skip":
		pp.dead.Unwritable = consumer.UnwritableSkip
	default:
		return nil, d.choice(at("dead-letter.unwritable"), dl.Unwritable, "wait", "halt", "skip")
	}
	if dl.WriteTimeout < 0 {
		return nil, d.errAt(at("dead-letter.write-timeout"), "negative")
	}
	pp.dead.WriteTimeout = dl.WriteTimeout
	if c.CommitInterval < 0 || (c.CommitInterval > 0 && c.CommitInterval < 100*time.Millisecond) {
		return nil, d.errAt(at("commit-interval"), "%v: at least 100ms", c.CommitInterval)
	}
	if g := c.FloodGuard; g != nil {
		pp.flood = consumer.FloodGuard{Disable: g.Disable, Window: g.Window, Share: g.Share, Min: g.Min, Halt: g.Halt}
		if g.Window < 0 {
			return nil, d.errAt(at("flood-guard.window"), "negative")
		}
		if g.Min < 0 {
			return nil, d.errAt(at("flood-guard.min"), "negative")
		}
		if g.Share < 0 || g.Share > 1 {
			return nil, d.errAt(at("flood-guard.share"), "%v: a share from 0 to 1", g.Share)
		}
	}
	b := c.Buffer
	pp.buffer = consumer.BufferLimits{PartitionRecords: b.PartitionRecords, PartitionBytes: b.PartitionBytes, TotalRecords: b.TotalRecords, TotalBytes: b.TotalBytes}
	for k, v := range map[string]int64{"partition-records": int64(b.PartitionRecords), "partition-bytes": b.PartitionBytes, "total-records": int64(b.TotalRecords), "total-bytes": b.TotalBytes} {
		if v < 0 {
			return nil, d.errAt(at("buffer."+k), "negative")
		}
	}
	if a := c.Attempts; a != nil {
		pp.attempts = consumer.DurableAttempts{Disable: a.Disable, Topic: deadletter.Template(a.Topic)}
		if strings.Contains(a.Topic, "{topic}") {
			return nil, d.errAt(at("durable-attempts.topic"), "one topic serves every source topic: use {group}, not {topic}")
		}
		if err := pp.attempts.Topic.Validate(); err != nil {
			return nil, d.errAt(at("durable-attempts.topic"), "%v", err)
		}
	}
	return pp, nil
}

// checkFormat checks the format keys of a value or a key (at) and reads
// its Avro reader schema into schema.
func (p *runPlan) checkFormat(v *runCodec, at string, schema *string) error {
	d := p.doc
	if v.Format == "" {
		return d.errAt(at+".format", "required: one of %s", strings.Join(runFormats, ", "))
	}
	if err := d.choice(at+".format", v.Format, runFormats...); err != nil {
		return err
	}
	if fromRegistry(v) && p.cfg.SchemaRegistry == nil {
		return d.errAt(at+".format", "%s reads schemas from a registry: set schema-registry.url", v.Format)
	}
	if v.Format == "avro" {
		if v.SchemaFile == "" {
			return d.errAt(at+".schema-file", "required for avro: the reader schema (.avsc) the records are resolved to")
		}
		b, err := p.doc.readFile(p.rel(v.SchemaFile))
		if err != nil {
			return d.errAt(at+".schema-file", "%v", unwrapPath(err))
		}
		*schema = string(b)
		if _, err := parseAvroSchema(*schema); err != nil {
			return d.errAt(at+".schema-file", "%s: not an Avro schema: %v", v.SchemaFile, err)
		}
	} else if v.SchemaFile != "" {
		return d.errAt(at+".schema-file", "only the avro format reads a schema file (%s takes its schemas from the records)", v.Format)
	}
	if v.Message != "" {
		if v.Format != "protobuf" {
			return d.errAt(at+".message", "only the protobuf format takes a message name")
		}
		if !validMessageName(v.Message) {
			return d.errAt(at+".message", "%q is not a message's full name (package.Message, such as acme.Order)", cli.Safe(v.Message))
		}
	}
	return nil
}

func (p *runPlan) validateCodec(pp *pipelinePlan) error {
	if k := pp.cfg.Key; k != nil {
		at := pp.path + ".key"
		if len(k.Stages) > 0 {
			return p.doc.errAt(at+".stages", "a key is decoded by its format alone: stages are the value's")
		}
		if err := p.checkFormat(k, at, &pp.keySchema); err != nil {
			return err
		}
	}
	d, v := p.doc, &pp.cfg.Value
	at := pp.path + ".value"
	if err := p.checkFormat(v, at, &pp.schema); err != nil {
		return err
	}
	pp.keys = map[int]map[string][]byte{}
	for i, s := range v.Stages {
		sp := fmt.Sprintf("%s.stages[%d]", at, i)
		if s.Type == "" {
			return d.errAt(sp+".type", "required: one of %s", strings.Join(runStageTypes, ", "))
		}
		if err := d.choice(sp+".type", s.Type, runStageTypes...); err != nil {
			return err
		}
		if s.MaxSize < 0 || (s.MaxSize > 0 && s.Type == "aes-gcm") {
			return d.errAt(sp+".max-size", "the largest decompressed value, in bytes, of gzip and zstd (default 64 MiB)")
		}
		if s.Type != "aes-gcm" {
			if len(s.Keys) > 0 || s.KeyIDHeader != "" {
				return d.errAt(sp+".keys", "keys and key-id-header are keys of the aes-gcm stage")
			}
			continue
		}
		if len(s.Keys) == 0 {
			return d.errAt(sp+".keys", "required: key id → the file holding the key (16, 24 or 32 bytes; raw, hex or base64)")
		}
		keys := map[string][]byte{}
		for id, file := range s.Keys {
			k, err := readAESKey(p.doc, p.rel(file))
			if err != nil {
				return d.errAt(sp+".keys."+id, "%v", err)
			}
			keys[id] = k
		}
		pp.keys[i] = keys
	}
	return nil
}

// rel resolves a path of the file relative to its folder.
func (p *runPlan) rel(path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(p.doc.dir, path)
}

func (p *runPlan) validateSink(pp *pipelinePlan) error {
	d, s := p.doc, &pp.cfg.Sink
	at := pp.path + ".sink"
	if k := s.setKeys(); len(k) > 1 {
		return d.errAt(at+"."+k[1], "one sink per pipeline: %s or %s, not both", k[0], k[1])
	}
	switch {
	case s.HTTP == nil && s.Kafka == nil && s.OpenSearch == nil && s.Elasticsearch == nil && s.GRPC == nil:
		return d.errAt(at, "required: http, grpc, kafka, opensearch or elasticsearch")
	case s.OpenSearch != nil || s.Elasticsearch != nil:
		return p.validateSearchSink(pp)
	case s.GRPC != nil:
		return p.validateGRPCSink(pp)
	case s.HTTP != nil:
		h := s.HTTP
		if h.URL == "" {
			return d.errAt(at+".http.url", "required")
		}
		if err := checkURL(h.URL); err != nil {
			return d.errAt(at+".http.url", "%v", err)
		}
		if h.Timeout < 0 {
			return d.errAt(at+".http.timeout", "negative")
		}
		if h.Concurrency < 0 {
			return d.errAt(at+".http.concurrency", "negative")
		}
		for k, v := range h.Headers {
			if !validHeaderName(k) {
				return d.errAt(at+".http.headers."+k, "%q is not an HTTP header name", cli.Safe(k))
			}
			if !validHeaderValue(v) {
				return d.errAt(at+".http.headers."+k, "the value holds a control character")
			}
			if strings.HasPrefix(strings.ToLower(k), "antidote-") || strings.EqualFold(k, "Content-Type") {
				return d.errAt(at+".http.headers."+k, "%s is set from each record (see the header mapping)", k)
			}
		}
		if h.TLS != nil && strings.HasPrefix(h.URL, "http://") {
			return d.errAt(at+".http.tls", "the URL is http://: TLS needs https://")
		}
		if err := validateBatch(d, at+".http.batch", h.Batch, defaultHTTPBatchBytes); err != nil {
			return err
		}
	default:
		k := s.Kafka
		if k.Topic == "" {
			return d.errAt(at+".kafka.topic", "required")
		}
		if err := checkTopic(k.Topic); err != nil {
			return d.errAt(at+".kafka.topic", "%v", err)
		}
		for _, t := range pp.cfg.Topics {
			if t == k.Topic {
				return d.errAt(at+".kafka.topic", "%q is a source topic of this pipeline: forwarding to it would loop", k.Topic)
			}
		}
		if pat := pp.cfg.TopicPattern; pat != "" {
			if re, err := regexp.Compile("^(?:" + pat + ")$"); err == nil && re.MatchString(k.Topic) {
				return d.errAt(at+".kafka.topic", "%q matches the pipeline's topic-pattern: forwarding to it would loop", k.Topic)
			}
		}
		if k.Value != "" {
			if err := d.choice(at+".kafka.value", k.Value, "raw", "decoded"); err != nil {
				return err
			}
		}
		if e := k.ExactlyOnce; e != nil {
			eat := at + ".kafka.exactly-once"
			switch {
			case strings.TrimSpace(e.TransactionalID) == "":
				return d.errAt(eat+".transactional-id", "required: this member's own id, the same across restarts (a pod name, say: ${HOSTNAME}-%s)", pp.cfg.Name)
			case !validHeaderValue(e.TransactionalID):
				return d.errAt(eat+".transactional-id", "holds a control character")
			case e.MaxRecords < 0:
				return d.errAt(eat+".max-records", "negative")
			case e.Interval < 0 || (e.Interval > 0 && e.Interval < 10*time.Millisecond):
				return d.errAt(eat+".interval", "%v: at least 10ms", e.Interval)
			}
			for _, o := range p.pipelines {
				if ok := o.cfg.Sink.Kafka; ok != nil && ok.ExactlyOnce != nil && ok.ExactlyOnce.TransactionalID == e.TransactionalID {
					return d.errAt(eat+".transactional-id", "%q is also the id of pipeline %s: two pipelines with one id fence each other", cli.Safe(e.TransactionalID), o.cfg.Name)
				}
			}
			pp.eos = consumer.ExactlyOnce{TransactionalID: e.TransactionalID, MaxRecords: e.MaxRecords, Interval: e.Interval}
		}
	}
	return nil
}

// validateBatch checks the batch keys of the HTTP and gRPC sinks.
func validateBatch(d *yamlDoc, at string, b *runBulkBatch, defaultBytes int64) error {
	if b == nil {
		return nil
	}
	switch {
	case b.Size < 0:
		return d.errAt(at+".size", "negative")
	case b.Bytes < 0 || (b.Bytes > 0 && b.Bytes < 1024):
		return d.errAt(at+".bytes", "%d: at least 1024 (a request's size, in bytes; default %d)", b.Bytes, defaultBytes)
	case b.Linger < 0:
		return d.errAt(at+".linger", "negative")
	}
	return nil
}

// validateGRPCSink checks the grpc sink.
func (p *runPlan) validateGRPCSink(pp *pipelinePlan) error {
	d, g := p.doc, pp.cfg.Sink.GRPC
	at := pp.path + ".sink.grpc"
	switch {
	case g.Target == "":
		return d.errAt(at+".target", "required: host:port of the service, for example 127.0.0.1:50051")
	case !validHeaderValue(g.Target) || strings.ContainsAny(g.Target, " \t"):
		return d.errAt(at+".target", "%q holds a space or a control character", cli.Safe(g.Target))
	case strings.HasPrefix(g.Target, "http://") || strings.HasPrefix(g.Target, "https://"):
		return d.errAt(at+".target", "%q: a gRPC target is host:port (or dns:///host:port), not a URL; TLS is set with tls", cli.Safe(g.Target))
	case g.Timeout < 0:
		return d.errAt(at+".timeout", "negative")
	case g.Concurrency < 0:
		return d.errAt(at+".concurrency", "negative")
	case g.Keepalive < 0 || (g.Keepalive > 0 && g.Keepalive < 10*time.Second):
		return d.errAt(at+".keepalive", "%v: at least 10s (gRPC's floor; default %v)", g.Keepalive, defaultGRPCKeepalive)
	}
	for k, v := range g.Metadata {
		if !validMetadataKey(k) {
			return d.errAt(at+".metadata."+k, "%q is not a gRPC metadata key (lower case letters, digits, -, _ and .)", cli.Safe(k))
		}
		if strings.HasPrefix(k, "grpc-") {
			return d.errAt(at+".metadata."+k, "keys that start with grpc- are gRPC's own")
		}
		if !strings.HasSuffix(k, "-bin") && !printableASCII(v) {
			return d.errAt(at+".metadata."+k, "gRPC sends only printable ASCII in a metadata value (a key ending in -bin takes any bytes)")
		}
	}
	return validateBatch(d, at+".batch", g.Batch, defaultHTTPBatchBytes)
}

// validMessageName reports whether s is a Protobuf full name: dotted
// identifiers.
func validMessageName(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" || !(part[0] == '_' || part[0] >= 'A' && part[0] <= 'Z' || part[0] >= 'a' && part[0] <= 'z') {
			return false
		}
		for i := 1; i < len(part); i++ {
			c := part[i]
			if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// printableASCII reports whether s holds only the bytes 0x20 to 0x7e.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// validMetadataKey reports whether k is a gRPC metadata key.
func validMetadataKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// policy maps the policy keys onto consumer.Policy.
func (p *runPlan) policy(pp *pipelinePlan) (consumer.Policy, error) {
	var pol consumer.Policy
	stages := []struct {
		name string
		src  runStagePolicy
		dst  *consumer.StagePolicy
	}{{"deserialize", pp.cfg.Policy.Deserialize, &pol.Deserialize}, {"process", pp.cfg.Policy.Process, &pol.Process}}
	for _, s := range stages {
		slots := []struct {
			name string
			src  *runOutcome
			dst  *consumer.Rule
		}{{"transient", s.src.Transient, &s.dst.Transient}, {"permanent", s.src.Permanent, &s.dst.Permanent}, {"unclassified", s.src.Unclassified, &s.dst.Unclassified}}
		for _, slot := range slots {
			if slot.src == nil {
				continue
			}
			at := fmt.Sprintf("%s.policy.%s.%s", pp.path, s.name, slot.name)
			o, err := p.outcome(at, slot.src)
			if err != nil {
				return pol, err
			}
			*slot.dst = o
		}
	}
	return pol, nil
}

func (p *runPlan) outcome(at string, o *runOutcome) (consumer.Rule, error) {
	d := p.doc
	var out consumer.Rule
	switch o.Then {
	case "":
	case "dead-letter":
		out.Then = consumer.ActionDeadLetter
	case "skip":
		out.Then = consumer.ActionSkip
	case "halt":
		out.Then = consumer.ActionHalt
	case "retry-topics":
		out.Then = consumer.ActionRetryTopic
	default:
		return out, d.choice(at+".then", o.Then, runActions...)
	}
	if o.Retry == nil {
		return out, nil
	}
	r := o.Retry
	rp := at + ".retry"
	if r.Attempts < 0 {
		return out, d.errAt(rp+".attempts", "negative")
	}
	if r.Attempts == 1 {
		if d.has(rp+".initial") || d.has(rp+".max") || d.has(rp+".multiplier") || d.has(rp+".jitter") || d.has(rp+".max-elapsed") {
			return out, d.errAt(rp+".attempts", "1 try is no retry: the other retry keys would do nothing")
		}
		out.Retry = backoff.None()
		return out, nil
	}
	e := backoff.Exponential{Initial: r.Initial, Multiplier: r.Multiplier, Max: r.Max}
	switch r.Jitter {
	case "", "full":
		e.Jitter = backoff.JitterFull
	case "equal":
		e.Jitter = backoff.JitterEqual
	case "none":
		e.Jitter = backoff.JitterNone
	default:
		return out, d.choice(rp+".jitter", r.Jitter, "full", "equal", "none")
	}
	if err := e.Validate(); err != nil {
		return out, d.errAt(rp, "%v", err)
	}
	var pol backoff.Policy = e
	if r.Attempts > 1 {
		pol = backoff.MaxAttempts(pol, r.Attempts)
	}
	if r.MaxElapsed < 0 {
		return out, d.errAt(rp+".max-elapsed", "negative")
	}
	if r.MaxElapsed > 0 {
		pol = backoff.MaxElapsed(pol, r.MaxElapsed)
	}
	out.Retry = pol
	return out, nil
}

// checkHostPort checks a host:port address.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(a))
	if err != nil || port == "" {
		return fmt.Errorf("%q is not HOST:PORT", cli.Safe(a))
	}
	if host == "" && !strings.HasPrefix(a, ":") {
		return fmt.Errorf("%q has no host", cli.Safe(a))
	}
	return nil
}

// checkURL checks an http or https URL.
func checkURL(s string) error {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the URL must start with http:// or https://", cli.Safe(u.Redacted()))
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", cli.Safe(u.Redacted()))
	}
	return nil
}

// checkTopic checks a Kafka topic name.
func checkTopic(t string) error {
	if t == "" {
		return fmt.Errorf("empty topic name")
	}
	if len(t) > 249 {
		return fmt.Errorf("a topic name has at most 249 characters")
	}
	for _, r := range t {
		if !(r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("%q: a topic name holds letters, digits, '.', '_' and '-' only", cli.Safe(t))
		}
	}
	if t == "." || t == ".." {
		return fmt.Errorf("%q is not a topic name", t)
	}
	return nil
}

// validateRetryTopics checks the retry-topics block against the policy
// slots that use it: one without the other is an error.
func (p *runPlan) validateRetryTopics(pp *pipelinePlan) error {
	d := p.doc
	at := pp.path + ".retry-topics"
	rt := pp.cfg.RetryTopics
	used := ""
	for _, s := range []struct {
		name string
		sp   runStagePolicy
	}{{"deserialize", pp.cfg.Policy.Deserialize}, {"process", pp.cfg.Policy.Process}} {
		for _, slot := range []struct {
			class string
			o     *runOutcome
		}{{"transient", s.sp.Transient}, {"permanent", s.sp.Permanent}, {"unclassified", s.sp.Unclassified}} {
			if slot.o != nil && slot.o.Then == "retry-topics" && used == "" {
				used = fmt.Sprintf("%s.policy.%s.%s.then", pp.path, s.name, slot.class)
			}
		}
	}
	switch {
	case rt == nil && used != "":
		return d.errAt(used, "retry-topics: the pipeline has no retry-topics block with its tiers")
	case rt == nil:
		return nil
	case used == "":
		return d.errAt(at, "no policy slot has then: retry-topics")
	case len(rt.Tiers) == 0:
		return d.errAt(at+".tiers", "required: the delays, for example [1s, 30s, 5m]")
	}
	seen := map[time.Duration]bool{}
	for i, t := range rt.Tiers {
		k := fmt.Sprintf("%s.tiers[%d]", at, i)
		if t < 10*time.Millisecond || t%time.Millisecond != 0 {
			return d.errAt(k, "%v: a delay is at least 10ms, in whole milliseconds", t)
		}
		if seen[t] {
			return d.errAt(k, "%v twice: each tier has a topic of its own", t)
		}
		seen[t] = true
	}
	if rt.Topic != "" {
		if !strings.Contains(rt.Topic, "{delay}") {
			return d.errAt(at+".topic", "%q: use {delay}, so that each tier has a topic of its own", cli.Safe(rt.Topic))
		}
		if err := deadletter.Template(strings.ReplaceAll(rt.Topic, "{delay}", "30s")).Validate(); err != nil {
			return d.errAt(at+".topic", "%v", err)
		}
	}
	if rt.MaxParked < 0 {
		return d.errAt(at+".max-parked", "negative")
	}
	pp.retry = consumer.RetryTopics{Tiers: rt.Tiers, Topic: deadletter.Template(rt.Topic), Unordered: rt.Unordered, MaxParked: rt.MaxParked}
	switch rt.Then {
	case "", "dead-letter":
	case "skip":
		pp.retry.Then = consumer.ActionSkip
	case "halt":
		pp.retry.Then = consumer.ActionHalt
	default:
		return d.choice(at+".then", rt.Then, "dead-letter", "skip", "halt")
	}
	return nil
}

// validateShare checks group-type and, for a share group (KIP-932), what
// cannot apply to one.
func (p *runPlan) validateShare(pp *pipelinePlan) error {
	d, c := p.doc, pp.cfg
	at := func(k string) string { return pp.path + "." + k }
	switch c.GroupType {
	case "", "consumer":
		if c.Share != nil {
			return d.errAt(at("share"), "the settings of a share group's member: set group-type: share, or remove share")
		}
		return nil
	case "share":
	default:
		return d.choice(at("group-type"), c.GroupType, "consumer", "share")
	}
	not := func(k, why string) error {
		return d.errAt(at(k), "not with group-type: share: %s", why)
	}
	switch s := &c.Sink; {
	case c.GroupProtocol != "":
		return not("group-protocol", "it picks the protocol of a consumer group; a share group has its own")
	case s.OpenSearch != nil || s.Elasticsearch != nil:
		k := s.setKeys()[0]
		return not("sink."+k, "the "+k+" sink writes a partition's records in batches, and a share-group member handles records one by one as it acquires them (the consumer refuses a BatchHandler); use group-type: consumer, or an http or kafka sink")
	case s.HTTP != nil && s.HTTP.Batch != nil:
		return not("sink.http.batch", "batches are a partition's records, and a share-group member handles records one by one as it acquires them (the consumer refuses a BatchHandler); leave batch out")
	case s.GRPC != nil && s.GRPC.Batch != nil:
		return not("sink.grpc.batch", "batches are a partition's records, and a share-group member handles records one by one as it acquires them (the consumer refuses a BatchHandler); leave batch out")
	case s.Kafka != nil && s.Kafka.ExactlyOnce != nil:
		return not("sink.kafka.exactly-once", "a share group's acknowledgements are not part of Kafka transactions")
	case c.TopicPattern != "":
		return not("topic-pattern", "name the share group's topics in topics")
	case c.RetryTopics != nil:
		return not("retry-topics", "the group delivers a released record again itself, to any member, up to its delivery limit (share.delivery-limit)")
	case c.Attempts != nil && c.Attempts.Topic != "":
		return not("durable-attempts.topic", "the broker counts each record's deliveries")
	case c.FloodGuard != nil:
		return not("flood-guard", "a share-group member owns no partition to hold")
	case c.CommitInterval != 0:
		return not("commit-interval", "a share group's records are acknowledged one by one, not committed")
	case c.Buffer != runBuffer{}:
		return not("buffer", "a member holds one poll at a time: bound it with share.max-records")
	}
	sh := consumer.Share{}
	if s := c.Share; s != nil {
		switch {
		case s.DeliveryLimit == 1 || s.DeliveryLimit < 0:
			return d.errAt(at("share.delivery-limit"), "%d: Kafka's lowest is 2 (leave it out to read the group's from the cluster)", s.DeliveryLimit)
		case s.MaxRecords < 0:
			return d.errAt(at("share.max-records"), "negative")
		}
		sh = consumer.Share{DeliveryLimit: s.DeliveryLimit, FromEarliest: s.FromEarliest, MaxRecords: s.MaxRecords}
	}
	pp.share = &sh
	return nil
}
