package run

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
	"github.com/antidote-kafka/antidote/serde/protobuf"
)

// The value of a pipeline decodes to the bytes a sink sends: the output of
// the stages for bytes, the UTF-8 text for string, the JSON for json and
// json-schema, and the record as JSON for avro (hamba/avro's generic
// decoding resolved to the reader schema: bytes and fixed as base64, a union
// of null and one type as that type's value or null, any other union as
// {"type": value}).

// contentTypes are the Content-Type of each format.
var contentTypes = map[string]string{
	"json":        "application/json",
	"json-schema": "application/json",
	"avro":        "application/json",
	"protobuf":    "application/json",
	"string":      "text/plain; charset=utf-8",
	"bytes":       "application/octet-stream",
}

// valueDeserializer builds the pipeline's decode chain.
func (pp *pipelinePlan) valueDeserializer(reg *avro.Registry) (serde.Deserializer[[]byte], string, error) {
	v := pp.cfg.Value
	codec, err := codecOf(v, pp.schema, reg)
	if err != nil {
		return nil, "", fmt.Errorf("pipeline %s: %w", pp.cfg.Name, err)
	}
	stages := make([]serde.Stage, 0, len(v.Stages))
	for i, s := range v.Stages {
		var opts []serde.CompressOption
		if s.MaxSize > 0 {
			opts = append(opts, serde.MaxSize(s.MaxSize))
		}
		switch s.Type {
		case "gzip":
			stages = append(stages, serde.Gzip(opts...))
		case "zstd":
			stages = append(stages, serde.Zstd(opts...))
		case "aes-gcm":
			var o []serde.AESGCMOption
			if s.KeyIDHeader != "" {
				o = append(o, serde.KeyIDHeader(s.KeyIDHeader))
			}
			stages = append(stages, serde.AESGCM(serde.StaticKeys(pp.keys[i]), o...))
		}
	}
	return serde.Pipe(codec, stages...), contentTypes[v.Format], nil
}

// describeFormat is what --check says of a value or key format.
func describeFormat(c runCodec) string {
	switch c.Format {
	case "avro":
		return "avro (reader schema " + c.SchemaFile + ", sent as JSON)"
	case "protobuf":
		if c.Message != "" {
			return "protobuf (message " + c.Message + ", sent as JSON)"
		}
		return "protobuf (any message, sent as JSON)"
	}
	return c.Format
}

// codecOf is the deserializer of a format: the value's or the key's.
func codecOf(v runCodec, schema string, reg *avro.Registry) (serde.Deserializer[[]byte], error) {
	switch v.Format {
	case "bytes":
		return rawBytes{}, nil
	case "string":
		return body[string]{name: "string", d: serde.String(serde.ValidUTF8()), conv: func(s string) ([]byte, error) { return []byte(s), nil }}, nil
	case "json":
		return body[json.RawMessage]{name: "json", d: serde.JSON[json.RawMessage](), conv: func(m json.RawMessage) ([]byte, error) { return m, nil }}, nil
	case "json-schema":
		d, err := jsonschema.NewDeserializer[json.RawMessage](reg.Registry)
		if err != nil {
			return nil, err
		}
		return body[json.RawMessage]{name: "jsonschema", d: d, conv: func(m json.RawMessage) ([]byte, error) { return m, nil }}, nil
	case "avro":
		d, err := avro.NewDeserializer[any](reg, schema)
		if err != nil {
			return nil, err
		}
		return body[any]{name: "avro", d: d, conv: func(v any) ([]byte, error) { return json.Marshal(v) }}, nil
	case "protobuf":
		// Without generated types: the writer schema from the registry
		// decodes each record into the JSON of its message.
		return protobuf.NewJSONDeserializer(reg.Registry, v.Message)
	}
	return nil, fmt.Errorf("unknown format %q", v.Format)
}

// keyDeserializer decodes the key with the pipeline's key.format; without
// one the key goes on as it is. A null key stays null, whatever the format.
func (pp *pipelinePlan) keyDeserializer(reg *avro.Registry) (serde.Deserializer[[]byte], error) {
	k := pp.cfg.Key
	if k == nil {
		return rawBytes{}, nil
	}
	codec, err := codecOf(*k, pp.keySchema, reg)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: key: %w", pp.cfg.Name, err)
	}
	return nullable{codec}, nil
}

// nullable leaves a null key null: only keys that are there are decoded.
type nullable struct{ serde.Deserializer[[]byte] }

func (n nullable) Deserialize(ctx context.Context, m serde.Meta, data []byte) ([]byte, error) {
	if data == nil {
		return nil, nil
	}
	return n.Deserializer.Deserialize(ctx, m, data)
}

// rawBytes hands the bytes on as they are (the sinks only read them).
type rawBytes struct{}

func (rawBytes) Name() string { return "bytes" }

func (rawBytes) Deserialize(_ context.Context, _ serde.Meta, data []byte) ([]byte, error) {
	return data, nil
}

// body decodes with d, then turns the value into the bytes the sink sends.
type body[T any] struct {
	name string
	d    serde.Deserializer[T]
	conv func(T) ([]byte, error)
}

func (b body[T]) Name() string { return b.name }

func (b body[T]) Deserialize(ctx context.Context, m serde.Meta, data []byte) ([]byte, error) {
	v, err := b.d.Deserialize(ctx, m, data)
	if err != nil {
		return nil, err
	}
	out, err := b.conv(v)
	if err != nil {
		return nil, failure.Permanent(err)
	}
	return out, nil
}

// parseAvroSchema checks a reader schema.
func parseAvroSchema(s string) (hamba.Schema, error) { return hamba.Parse(s) }

// readAESKey reads an AES key from a file: 16, 24 or 32 raw bytes, or their
// hex or base64 text.
func readAESKey(d *yamlDoc, path string) ([]byte, error) {
	b, err := d.readFile(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if n := len(b); n == 16 || n == 24 || n == 32 {
		return b, nil
	}
	t := strings.TrimSpace(string(b))
	if k, err := hex.DecodeString(t); err == nil && aesSize(len(k)) {
		return k, nil
	}
	if k, err := base64.StdEncoding.DecodeString(t); err == nil && aesSize(len(k)) {
		return k, nil
	}
	return nil, fmt.Errorf("%s: not an AES key: want 16, 24 or 32 bytes, raw or as hex or base64 text (it holds %d bytes)", path, len(b))
}

func aesSize(n int) bool { return n == 16 || n == 24 || n == 32 }

// redactURL drops the password of a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(not a URL)"
	}
	return cli.Safe(u.Redacted())
}

// describe is what --check prints about the pipeline.
func (pp *pipelinePlan) describe() []string {
	c := pp.cfg
	lines := []string{fmt.Sprintf("pipeline %s", c.Name)}
	add := func(k, format string, args ...any) {
		lines = append(lines, fmt.Sprintf("  %-11s %s", k, fmt.Sprintf(format, args...)))
	}
	if sh := pp.share; sh != nil {
		limit := "read from the cluster"
		if sh.DeliveryLimit > 0 {
			limit = fmt.Sprint(sh.DeliveryLimit)
		}
		from := "new records"
		if sh.FromEarliest {
			from = "from the earliest"
		}
		add("source", "topics %s, share group %s (delivery limit %s; %s; at most %d records a poll)", strings.Join(c.Topics, ", "), c.Group, limit, from, cmp.Or(sh.MaxRecords, 500))
	} else if c.TopicPattern != "" {
		add("source", "topics matching %s, listed every %v (not their dead-letter topics), group %s (%s protocol)",
			c.TopicPattern, cmpDur(c.TopicRefresh, 30*time.Second), c.Group, pp.protocol)
	} else {
		add("source", "topics %s, group %s (%s protocol)", strings.Join(c.Topics, ", "), c.Group, pp.protocol)
	}
	chain := make([]string, 0, len(c.Value.Stages)+1)
	for _, s := range c.Value.Stages {
		switch s.Type {
		case "aes-gcm":
			ids := make([]string, 0, len(s.Keys))
			for id := range s.Keys {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			chain = append(chain, fmt.Sprintf("aes-gcm (key ids %s, from header %s)", strings.Join(ids, ", "), cmp.Or(s.KeyIDHeader, serde.DefaultKeyIDHeader)))
		default:
			chain = append(chain, fmt.Sprintf("%s (at most %d bytes)", s.Type, cmpInt(s.MaxSize, serde.DefaultMaxSize)))
		}
	}
	chain = append(chain, describeFormat(c.Value))
	if c.Key != nil {
		add("key", "%s (a null key stays null)", describeFormat(*c.Key))
	}
	add("value", "%s", strings.Join(chain, " | "))
	switch {
	case c.Sink.HTTP != nil:
		h := c.Sink.HTTP
		hdrs := make([]string, 0, len(h.Headers))
		for k := range h.Headers {
			hdrs = append(hdrs, k)
		}
		sort.Strings(hdrs)
		extra := ""
		if len(hdrs) > 0 {
			extra = ", headers " + strings.Join(hdrs, ", ") + " (values not shown)"
		}
		if b := h.Batch; b != nil {
			add("sink", "http POST %s in batches of at most %d records or %d bytes, linger %v (timeout %v, at most %d requests at once%s)", redactURL(h.URL),
				cmpInt(int64(b.Size), defaultHTTPBatchSize), cmpInt(b.Bytes, defaultHTTPBatchBytes), cmpDur(b.Linger, defaultBulkLinger),
				cmpDur(h.Timeout, defaultHTTPTimeout), cmpInt(int64(h.Concurrency), defaultHTTPConcurrency), extra)
			break
		}
		add("sink", "http POST %s (timeout %v, at most %d requests at once, %s%s)", redactURL(h.URL), cmpDur(h.Timeout, defaultHTTPTimeout), cmpInt(int64(h.Concurrency), defaultHTTPConcurrency), contentTypes[c.Value.Format], extra)
	case c.Sink.OpenSearch != nil || c.Sink.Elasticsearch != nil:
		add("sink", "%s", describeSearch(c.Sink))
	case c.Sink.GRPC != nil:
		add("sink", "%s", describeGRPC(c.Sink.GRPC, c.Value.Format))
	default:
		k := c.Sink.Kafka
		if e := k.ExactlyOnce; e != nil {
			add("sink", "kafka topic %s (value %s; exactly once: written in the transaction that commits the source offset, transactional id %s, at most %d records or %v a transaction)",
				k.Topic, cmp.Or(k.Value, "raw"), e.TransactionalID, cmpInt(int64(e.MaxRecords), 10000), cmpDur(e.Interval, 100*time.Millisecond))
			break
		}
		add("sink", "kafka topic %s (value %s)", k.Topic, cmp.Or(k.Value, "raw"))
	}
	for _, s := range []struct {
		name string
		sp   runStagePolicy
		def  [3]string
	}{
		{"deserialize", c.Policy.Deserialize, [3]string{"retry exponential 200ms x2 up to 30s, full jitter, no limit", "no retry", "no retry"}},
		{"process", c.Policy.Process, [3]string{"retry exponential 100ms x2 up to 5s, full jitter, 4 tries", "no retry", "retry exponential 100ms x2 up to 5s, full jitter, 4 tries"}},
	} {
		for i, slot := range []struct {
			class string
			o     *runOutcome
		}{{"transient", s.sp.Transient}, {"permanent", s.sp.Permanent}, {"unclassified", s.sp.Unclassified}} {
			retry, then := s.def[i], "dead-letter"
			if slot.o != nil {
				if slot.o.Retry != nil {
					retry = describeBackoff(slot.o.Retry)
				}
				then = cmp.Or(slot.o.Then, then)
			}
			key := ""
			if i == 0 && s.name == "deserialize" {
				key = "policy"
			}
			add(key, "%-11s %-12s %s, then %s", s.name, slot.class, retry, then)
		}
	}
	dl := cmp.Or(string(pp.dead.Topic), "{topic}.dlq")
	names := make([]string, len(c.Topics))
	for i, t := range c.Topics {
		names[i] = pp.dead.Topic.Name(t, c.Group)
	}
	create := "created when missing"
	if pp.dead.DisableTopicCreation {
		create = "not created"
	}
	add("dead-letter", "%s → %s (%s; unwritable: %s)", dl, strings.Join(names, ", "), create, pp.dead.Unwritable)
	if pp.flood.Disable {
		add("flood-guard", "off")
	} else {
		fg := pp.flood
		add("flood-guard", "pause when more than %v of a partition's last %d records (at least %d) would be dead-lettered", cmpF(fg.Share, 0.5), cmpInt(int64(fg.Window), 1000), cmpInt(int64(fg.Min), 100))
	}
	if rt := pp.retry; len(rt.Tiers) > 0 {
		tiers := make([]string, 0, len(rt.Tiers)*len(c.Topics))
		for _, t := range c.Topics {
			for _, d := range rt.Tiers {
				tiers = append(tiers, rt.TierTopic(t, c.Group, d))
			}
		}
		order := "per-key order kept"
		if rt.Unordered {
			order = "unordered"
		}
		then := "dead-letter"
		if rt.Then != 0 {
			then = rt.Then.String()
		}
		add("retry-topics", "%s, then %s (%s)", strings.Join(tiers, ", "), then, order)
	}
	if cc := pp.conc; cc.Max > 1 {
		order := "one key at a time"
		if cc.Unordered {
			order = "any order"
		}
		add("concurrency", "%d records of a partition at once, %s", cc.Max, order)
	}
	add("commit", "every %v, and on revoke and shutdown", cmpDur(c.CommitInterval, 5*time.Second))
	return lines
}

// describeBackoff describes a retry of the file.
func describeBackoff(r *runBackoff) string {
	if r.Attempts == 1 {
		return "no retry"
	}
	s := fmt.Sprintf("retry exponential %v x%v up to %v, %s jitter", cmpDur(r.Initial, backoff.DefaultInitial), cmpF(r.Multiplier, backoff.DefaultMultiplier), cmpDur(r.Max, backoff.DefaultMax), cmp.Or(r.Jitter, "full"))
	if r.Attempts > 1 {
		s += fmt.Sprintf(", %d tries", r.Attempts)
	} else if r.MaxElapsed == 0 {
		s += ", no limit"
	}
	if r.MaxElapsed > 0 {
		s += fmt.Sprintf(", for at most %v", r.MaxElapsed)
	}
	return s
}

func cmpInt(v, def int64) int64 {
	if v != 0 {
		return v
	}
	return def
}

func cmpDur(v, def time.Duration) time.Duration {
	if v != 0 {
		return v
	}
	return def
}

func cmpF(v, def float64) float64 {
	if v != 0 {
		return v
	}
	return def
}
