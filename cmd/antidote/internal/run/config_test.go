package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/consumer"
)

// pipelineYAML is a valid pipeline, to which the cases add or change keys.
const pipelineYAML = `kafka:
  brokers: [127.0.0.1:9092]
pipelines:
  - name: billing
    topics: [orders]
    group: billing
    value:
      format: json
    sink:
      http:
        url: http://127.0.0.1:8080/orders
`

// TestRunConfigErrors: every error names the file, the line and the key,
// and says what is wrong; an unknown key gets a "did you mean".
func TestRunConfigErrors(t *testing.T) {
	env := map[string]string{"PORT": "8080", "BAD_INT": "eight", "EMPTY": ""}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown top key", "kafak:\n  brokers: [localhost:9092]\n", "f.yaml:1: kafak: unknown key (did you mean kafka?)"},
		{"unknown nested key", strings.Replace(pipelineYAML, "        url:", "        timout: 5s\n        url:", 1), "f.yaml:11: pipelines[0].sink.http.timout: unknown key (did you mean timeout?)"},
		{"unknown key far", strings.Replace(pipelineYAML, "    group: billing", "    group: billing\n    zzz: 1", 1), "f.yaml:7: pipelines[0].zzz: unknown key (the keys here are: buffer, commit-interval,"},
		{"bad format", strings.Replace(pipelineYAML, "format: json", "format: jsno", 1), `f.yaml:8: pipelines[0].value.format: "jsno" is not one of json, string, bytes, avro, json-schema, protobuf (did you mean json?)`},
		{"protobuf", strings.Replace(pipelineYAML, "format: json", "format: protobuf", 1), "f.yaml:8: pipelines[0].value.format: protobuf reads schemas from a registry: set schema-registry.url"},
		{"no topics", strings.Replace(pipelineYAML, "    topics: [orders]\n", "", 1), "f.yaml:4: pipelines[0].topics: required"},
		{"bad topic", strings.Replace(pipelineYAML, "[orders]", "[orders, \"a b\"]", 1), `f.yaml:5: pipelines[0].topics[1]: "a b": a topic name holds letters`},
		{"no sink", strings.Replace(pipelineYAML, "    sink:\n      http:\n        url: http://127.0.0.1:8080/orders\n", "", 1), "f.yaml:4: pipelines[0].sink: required: http, grpc, kafka, opensearch or elasticsearch"},
		{"bad url", strings.Replace(pipelineYAML, "http://127.0.0.1:8080/orders", "ftp://x/", 1), `f.yaml:11: pipelines[0].sink.http.url: "ftp://x/": the URL must start with http:// or https://`},
		{"bad duration", strings.Replace(pipelineYAML, "        url:", "        timeout: 5 seconds\n        url:", 1), `f.yaml:11: pipelines[0].sink.http.timeout: "5 seconds" is not a duration`},
		{"type mismatch", strings.Replace(pipelineYAML, "        url:", "        concurrency: many\n        url:", 1), "f.yaml:11: pipelines[0].sink.http.concurrency:"},
		{"unset variable", strings.Replace(pipelineYAML, "8080", "${NOPE}", 1), "f.yaml:11: pipelines[0].sink.http.url: ${NOPE}: the environment variable NOPE is not set"},
		{"substituted not a number", strings.Replace(pipelineYAML, "        url:", "        concurrency: ${BAD_INT}\n        url:", 1), `f.yaml:11: pipelines[0].sink.http.concurrency: the substituted value "eight" is not an integer`},
		{"substituted bool", pipelineYAML + "    dead-letter: {create: \"${PORT}\"}\n", `f.yaml:12: pipelines[0].dead-letter.create: the substituted value "8080" is not true or false`},
		{"missing file", strings.Replace(pipelineYAML, "        url:", "        headers: {Authorization: \"${file:nope.txt}\"}\n        url:", 1), "f.yaml:11: pipelines[0].sink.http.headers.Authorization: ${file:nope.txt}:"},
		{"bad variable name", strings.Replace(pipelineYAML, "8080", "${A-B}", 1), "pipelines[0].sink.http.url: ${A-B}: not an environment variable name"},
		{"unclosed", strings.Replace(pipelineYAML, "8080", "${PORT", 1), "pipelines[0].sink.http.url: \"${PORT/orders\": ${ without its closing }"},
		{"bad action", pipelineYAML + "    policy:\n      process:\n        permanent: {then: skp}\n", `f.yaml:14: pipelines[0].policy.process.permanent.then: "skp" is not one of dead-letter, skip, halt, retry-topics (did you mean skip?)`},
		{"bad backoff", pipelineYAML + "    policy:\n      process:\n        transient:\n          retry: {multiplier: 0.5}\n", "f.yaml:15: pipelines[0].policy.process.transient.retry: backoff: invalid policy"},
		{"useless retry keys", pipelineYAML + "    policy:\n      process:\n        transient:\n          retry: {attempts: 1, max: 1s}\n", "pipelines[0].policy.process.transient.retry.attempts: 1 try is no retry"},
		{"retry topics in a slot", pipelineYAML + "    policy:\n      process:\n        transient:\n          retry-topics: [5s]\n", "f.yaml:15: pipelines[0].policy.process.transient.retry-topics: unknown key"},
		{"then retry-topics without tiers", pipelineYAML + "    policy:\n      process:\n        transient: {then: retry-topics}\n", "f.yaml:14: pipelines[0].policy.process.transient.then: retry-topics: the pipeline has no retry-topics block"},
		{"tiers without a slot", pipelineYAML + "    retry-topics: {tiers: [1s]}\n", "f.yaml:12: pipelines[0].retry-topics: no policy slot has then: retry-topics"},
		{"short tier", pipelineYAML + "    policy:\n      process:\n        transient: {then: retry-topics}\n    retry-topics: {tiers: [1s, 1ms]}\n", "pipelines[0].retry-topics.tiers[1]: 1ms: a delay is at least 10ms"},
		{"tier template without delay", pipelineYAML + "    policy:\n      process:\n        transient: {then: retry-topics}\n    retry-topics: {tiers: [1s], topic: \"{topic}.retry\"}\n", "pipelines[0].retry-topics.topic: \"{topic}.retry\": use {delay}"},
		{"concurrency zero", pipelineYAML + "    concurrency: {max: 0}\n", "f.yaml:12: pipelines[0].concurrency.max: at least 1"},
		{"keyed concurrency key", pipelineYAML + "    keyed-concurrency: 8\n", "f.yaml:12: pipelines[0].keyed-concurrency: unknown key"},
		{"two sinks", pipelineYAML + "      kafka: {topic: x}\n", "f.yaml:12: pipelines[0].sink.kafka: one sink per pipeline"},
		{"forward loop", strings.Replace(pipelineYAML, "      http:\n        url: http://127.0.0.1:8080/orders\n", "      kafka: {topic: orders}\n", 1), `pipelines[0].sink.kafka.topic: "orders" is a source topic of this pipeline`},
		{"duplicate name", pipelineYAML + strings.SplitN(pipelineYAML, "pipelines:\n", 2)[1], `f.yaml:12: pipelines[1].name: "billing" is also the name of pipelines[0]`},
		{"avro without registry", strings.Replace(pipelineYAML, "format: json", "format: avro", 1), "pipelines[0].value.format: avro reads schemas from a registry: set schema-registry.url"},
		{"aes without keys", strings.Replace(pipelineYAML, "      format: json\n", "      format: json\n      stages: [{type: aes-gcm}]\n", 1), "f.yaml:9: pipelines[0].value.stages[0].keys: required"},
		{"stage typo", strings.Replace(pipelineYAML, "      format: json\n", "      format: json\n      stages: [{type: gzp}]\n", 1), `pipelines[0].value.stages[0].type: "gzp" is not one of gzip, zstd, aes-gcm (did you mean gzip?)`},
		{"remote admin", pipelineYAML + "admin: {address: 0.0.0.0:9180}\n", `f.yaml:12: admin.address: "0.0.0.0:9180" is not a loopback address`},
		{"remote admin without TLS", pipelineYAML + "admin: {address: 0.0.0.0:9180, allow-remote: true}\n", `admin.address: "0.0.0.0:9180" is not a loopback address: the console under /ui/ is served there over TLS only (its logins and session cookies would cross the network in the clear); set admin.tls.cert-file and admin.tls.key-file`},
		{"oidc without a client", pipelineYAML + "admin: {address: 127.0.0.1:9180, oidc: {issuer: https://dex.example, viewers: [dev]}}\n", `admin.oidc.client-id: required`},
		{"oidc without roles", pipelineYAML + "admin: {address: 127.0.0.1:9180, oidc: {issuer: https://dex.example, client-id: antidote}}\n", `admin.oidc: operators or viewers is required`},
		{"console url", pipelineYAML + "admin: {address: 127.0.0.1:9180, url: https://antidote.example/}\n", `admin.url: "https://antidote.example/": want the console's URL`},
		{"half a certificate", pipelineYAML + "admin: {address: 0.0.0.0:9180, allow-remote: true, tls: {cert-file: c.pem}}\n", `admin.tls: cert-file and key-file are both required`},
		{"kafka and context", pipelineYAML + "context: prod\n", "f.yaml:12: context: give the connection once"},
		{"bad header name", strings.Replace(pipelineYAML, "        url:", "        headers: {\"Bad Name\": x}\n        url:", 1), `pipelines[0].sink.http.headers.Bad Name: "Bad Name" is not an HTTP header name`},
		{"reserved header", strings.Replace(pipelineYAML, "        url:", "        headers: {Antidote-Topic: x}\n        url:", 1), "pipelines[0].sink.http.headers.Antidote-Topic: Antidote-Topic is set from each record"},
		{"syntax", "pipelines:\n  - name: a\n   topics: [x]\n", "f.yaml:3:"},
		{"not a list", "pipelines: 3\n", "f.yaml:1: pipelines:"},
		{"empty", "", "f.yaml: is empty"},
		{"no pipelines", "kafka:\n  brokers: [localhost:9092]\n", "f.yaml: pipelines: required: at least one pipeline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), getenv, nil)
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.yaml)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %s\ndoes not hold\n  %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error on several lines: %q", err)
			}
		})
	}
}

// TestRunConfigMapping: the keys land in consumer.Config's fields, and
// ${VAR}, ${file:} and $${ substitute as documented.
func TestRunConfigMapping(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token.txt"), []byte("s3cr:et #x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k1.hex")
	if err := os.WriteFile(key, []byte("000102030405060708090a0b0c0d0e0f\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := `kafka:
  brokers: ["${HOST}:9092"]
pipelines:
  - name: billing
    topics: [orders, refunds]
    group: billing
    group-protocol: consumer
    commit-interval: 2s
    value:
      format: string
      stages:
        - {type: aes-gcm, keys: {k1: ` + key + `}, key-id-header: kid}
        - {type: zstd, max-size: 1000}
    sink:
      http:
        url: http://127.0.0.1:${PORT}/x
        concurrency: ${CONC}
        headers:
          Authorization: "Bearer ${file:token.txt}"
          X-Literal: "$${NOT_A_VAR}"
    policy:
      deserialize:
        transient: {retry: {initial: 1s, max: 1m, jitter: equal}}
      process:
        transient: {retry: {attempts: 1}, then: skip}
        permanent: {then: halt}
        unclassified: {retry: {initial: 10ms, attempts: 3, max-elapsed: 1m}}
    dead-letter: {topic: "dlq.{group}.{topic}", create: false, unwritable: skip, write-timeout: 3s}
    flood-guard: {share: 0.1, window: 200, min: 10}
    buffer: {partition-records: 100, total-bytes: 1048576}
    durable-attempts: {disable: true}
  - name: cleaner
    topics: [raw]
    group: cleaner
    value: {format: json}
    sink:
      kafka: {topic: clean}
    policy:
      process:
        transient: {retry: {attempts: 2, initial: 100ms}, then: retry-topics}
    retry-topics: {tiers: [1s, 30s], then: skip, max-parked: 500}
    concurrency: {max: 16, ahead: 64}
`
	env := map[string]string{"HOST": "kafka-1", "PORT": "9999", "CONC": "7"}
	p, err := parseRunFile(filepath.Join(dir, "run.yaml"), []byte(y), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	pp := p.pipelines[0]
	c := pp.cfg
	if p.cfg.Kafka.Brokers[0] != "kafka-1:9092" || c.Sink.HTTP.URL != "http://127.0.0.1:9999/x" || c.Sink.HTTP.Concurrency != 7 {
		t.Fatalf("substitution: %v %q %d", p.cfg.Kafka.Brokers, c.Sink.HTTP.URL, c.Sink.HTTP.Concurrency)
	}
	if got := c.Sink.HTTP.Headers["Authorization"]; got != "Bearer s3cr:et #x" {
		t.Fatalf("${file:} = %q", got)
	}
	if got := c.Sink.HTTP.Headers["X-Literal"]; got != "${NOT_A_VAR}" {
		t.Fatalf("$${ = %q", got)
	}
	if pp.protocol != consumer.GroupConsumer || c.CommitInterval != 2*time.Second {
		t.Fatalf("protocol %v, commit %v", pp.protocol, c.CommitInterval)
	}
	if k := pp.keys[0]["k1"]; len(k) != 16 || k[15] != 15 {
		t.Fatalf("aes key %x", k)
	}
	pol := pp.policy
	if pol.Process.Transient.Then != consumer.ActionSkip || pol.Process.Permanent.Then != consumer.ActionHalt {
		t.Fatalf("actions %v %v", pol.Process.Transient.Then, pol.Process.Permanent.Then)
	}
	if _, ok := pol.Process.Transient.Retry.Next(1, 0); ok {
		t.Fatal("attempts: 1 retries")
	}
	if w, ok := pol.Process.Unclassified.Retry.Next(2, 0); !ok || w > 20*time.Millisecond {
		t.Fatalf("unclassified retry 2: %v %v", w, ok)
	}
	if _, ok := pol.Process.Unclassified.Retry.Next(3, 0); ok {
		t.Fatal("attempts: 3 allows a 4th try")
	}
	if w, ok := pol.Deserialize.Transient.Retry.Next(1, 0); !ok || w < 500*time.Millisecond || w > time.Second {
		t.Fatalf("equal jitter of 1s: %v", w)
	}
	if pol.Deserialize.Permanent.Retry != nil {
		t.Fatal("an unset slot is not left to the default")
	}
	d := pp.dead
	if d.Topic.Name("orders", "billing") != "dlq.billing.orders" || !d.DisableTopicCreation || d.Unwritable != consumer.UnwritableSkip || d.WriteTimeout != 3*time.Second {
		t.Fatalf("dead letter %+v", d)
	}
	if pp.flood.Share != 0.1 || pp.flood.Window != 200 || pp.flood.Min != 10 || pp.buffer.PartitionRecords != 100 || pp.buffer.TotalBytes != 1<<20 || !pp.attempts.Disable {
		t.Fatalf("flood %+v buffer %+v attempts %+v", pp.flood, pp.buffer, pp.attempts)
	}
	// Retry topics and keyed concurrency of the second pipeline.
	cl := p.pipelines[1]
	if cl.policy.Process.Transient.Then != consumer.ActionRetryTopic || len(cl.retry.Tiers) != 2 || cl.retry.Tiers[1] != 30*time.Second ||
		cl.retry.Then != consumer.ActionSkip || cl.retry.MaxParked != 500 || cl.conc.Max != 16 || cl.conc.Ahead != 64 {
		t.Fatalf("retry topics %+v, concurrency %+v", cl.retry, cl.conc)
	}
	if out := strings.Join(cl.describe(), "\n"); !strings.Contains(out, "raw.retry.1s, raw.retry.30s") || !strings.Contains(out, "16 records of a partition at once") {
		t.Errorf("--check of the retry tiers and concurrency:\n%s", out)
	}
	// The decode chain runs: the stages and the format.
	if _, _, err := pp.valueDeserializer(nil); err != nil {
		t.Fatal(err)
	}
	// --check never shows a substituted secret.
	out := strings.Join(pp.describe(), "\n")
	if strings.Contains(out, "s3cr") || !strings.Contains(out, "headers Authorization, X-Literal (values not shown)") {
		t.Fatalf("describe:\n%s", out)
	}
}

// TestRunCheckExamples: every shipped example validates with --check, and
// the output names each pipeline's sink.
func TestRunCheckExamples(t *testing.T) {
	t.Setenv("ADMIN_TOKEN", "example-token")
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		code, out, errOut := runCmd(t, "run", "--check", "-c", f)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", f, code, out, errOut)
		}
		if !strings.Contains(out, f+": valid") || !strings.Contains(out, "  sink ") {
			t.Fatalf("%s:\n%s", f, out)
		}
		t.Logf("%s", out)
	}
}

// TestRunBadFile: the command's own errors are one line, exit 2.
func TestRunBadFile(t *testing.T) {
	code, _, errOut := runCmd(t, "run")
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "-c FILE")
	code, _, errOut = runCmd(t, "run", "-c", filepath.Join(t.TempDir(), "none.yaml"))
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "none.yaml: no such file or directory")
	f := clitest.WriteFile(t, "bad.yaml", strings.Replace(pipelineYAML, "group: billing", "groop: billing", 1))
	code, _, errOut = runCmd(t, "run", "--check", "-c", f)
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "bad.yaml:6: pipelines[0].groop: unknown key (did you mean group?)")
}

// FuzzRunConfig: any file parses to a plan or an error naming the file;
// it never panics.
func FuzzRunConfig(f *testing.F) {
	f.Add([]byte(pipelineYAML))
	f.Add([]byte("pipelines: [{name: a, topics: [x], group: g, value: {format: json}, sink: {kafka: {topic: y}}}]"))
	f.Add([]byte("a: &x {b: 1}\nc: *x\n<<: *x\n"))
	f.Add([]byte("pipelines:\n  - name: ${A}\n    value: {format: \"${file:}\"}\n"))
	f.Add([]byte("pipelines: !!map {a: b}\n---\nx: 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := parseRunFile("f.yaml", b, func(string) (string, bool) { return "1", true }, func(p string) ([]byte, error) { return []byte(p), nil })
		if err != nil && !strings.HasPrefix(err.Error(), "f.yaml") {
			t.Fatalf("error without the file name: %v", err)
		}
	})
}

// TestRunCheckContext: a pipelines file may name a context of the antidote
// config file; --check resolves it (and its SASL secret) without
// connecting, and names a missing context with the ones there are.
func TestRunCheckContext(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("contexts:\n  prod:\n    brokers: [kafka-1:9093, kafka-2:9093]\n    sasl: {mechanism: SCRAM-SHA-512, username: app, password-file: "+pw+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := strings.SplitN(pipelineYAML, "pipelines:\n", 2)[1]
	run := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(run, []byte("context: prod\npipelines:\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "--config", cfg, "run", "--check", "-c", run)
	if code != 0 || !strings.Contains(out, "kafka-1:9093,kafka-2:9093 (context prod of "+cfg+", SASL SCRAM-SHA-512)") || strings.Contains(out, "hunter2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if err := os.WriteFile(run, []byte("context: staging\npipelines:\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd(t, "--config", cfg, "run", "--check", "-c", run)
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, `run.yaml:1: context: "staging" is not a context of `+cfg+" (it has: prod)")
}

// TestRunCheckAllErrors: --check reports an error of every section and
// pipeline that has one, not only the first of the file.
func TestRunCheckAllErrors(t *testing.T) {
	f := clitest.WriteFile(t, "bad.yaml", `kafka:
  brokers: [localhost:9092]
admin: {address: "10.1.2.3:9180"}
pipelines:
  - name: a
    topics: [orders]
    value: {format: json}
    sink: {http: {url: "http://localhost:8080/"}}
  - name: b
    topics: [payments]
    group: payments
    value: {format: json}
    sink: {}
`)
	code, _, errOut := runCmd(t, "run", "--check", "-c", f)
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "3 errors: ")
	for _, want := range []string{"bad.yaml:3: admin.address", "pipelines[0].group: required", "pipelines[1].sink: required"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("--check does not report %q: %s", want, errOut)
		}
	}
}

// TestKafkaSinkExactlyOnceConfig: the exactly-once keys are checked, two
// pipelines cannot share a transactional id, and --check says how the
// records are written.
func TestKafkaSinkExactlyOnceConfig(t *testing.T) {
	pipe := func(name, txid string) string {
		return fmt.Sprintf(`  - name: %s
    topics: [orders]
    group: %s
    value: {format: bytes}
    sink:
      kafka: {topic: out-%s, exactly-once: {transactional-id: "%s"}}
`, name, name, name, txid)
	}
	head := "kafka:\n  brokers: [127.0.0.1:9092]\npipelines:\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"no id", head + pipe("a", ""), "pipelines[0].sink.kafka.exactly-once.transactional-id: required"},
		{"shared", head + pipe("a", "x") + pipe("b", "x"), `pipelines[1].sink.kafka.exactly-once.transactional-id: "x" is also the id of pipeline a`},
		{"interval", strings.Replace(head+pipe("a", "x"), `"x"}`, `"x", interval: 1ms}`, 1), "exactly-once.interval: 1ms: at least 10ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
	file := clitest.WriteFile(t, "eos.yaml", head+pipe("a", "pod-0-a"))
	code, out, errOut := runCmd(t, "run", "--check", "-c", file)
	want := "kafka topic out-a (value raw; exactly once: written in the transaction that commits the source offset, transactional id pod-0-a, at most 10000 records or 100ms a transaction)"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("--check: exit %d\n%s%s\nwant the line %q", code, out, errOut, want)
	}
}

// TestProtobufFormatConfig: the protobuf format needs a registry, and
// value.message is a full name given only with it.
func TestProtobufFormatConfig(t *testing.T) {
	base := "kafka:\n  brokers: [127.0.0.1:9092]\nschema-registry: {url: http://127.0.0.1:8081}\npipelines:\n  - name: p\n    topics: [t]\n    group: g\n    value: {format: protobuf, message: MSG}\n    sink:\n      kafka: {topic: out, value: decoded}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"no registry", strings.Replace(strings.Replace(base, "schema-registry: {url: http://127.0.0.1:8081}\n", "", 1), "MSG", "acme.Order", 1), "protobuf reads schemas from a registry"},
		{"bad name", strings.Replace(base, "MSG", "acme..Order", 1), `pipelines[0].value.message: "acme..Order" is not a message's full name`},
		{"json", strings.Replace(strings.Replace(base, "format: protobuf", "format: json", 1), "MSG", "acme.Order", 1), "only the protobuf format takes a message name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
	if _, err := parseRunFile("f.yaml", []byte(strings.Replace(base, "MSG", "acme.v1.Order_2", 1)), nil, nil); err != nil {
		t.Errorf("a valid protobuf pipeline: %v", err)
	}
	for msg, want := range map[string]string{
		"acme.Order": "protobuf (message acme.Order, sent as JSON)",
		"":           "protobuf (any message, sent as JSON)",
	} {
		yaml := strings.Replace(base, "MSG", msg, 1)
		if msg == "" {
			yaml = strings.Replace(base, ", message: MSG", "", 1)
		}
		file := clitest.WriteFile(t, "proto.yaml", yaml)
		code, out, errOut := runCmd(t, "run", "--check", "-c", file)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--check with message %q: exit %d, want %q in\n%s%s", msg, code, want, out, errOut)
		}
	}
}

// TestTopicPatternRunConfig: topic-pattern replaces topics, is checked, and
// --check says what it reads.
func TestTopicPatternRunConfig(t *testing.T) {
	base := "kafka:\n  brokers: [127.0.0.1:9092]\npipelines:\n  - name: p\n    SRC\n    group: g\n    value: {format: json}\n    sink:\n      kafka: {topic: out}\n"
	for _, tc := range []struct{ src, want string }{
		{`topic-pattern: "orders["`, "pipelines[0].topic-pattern: not a regular expression"},
		{"topics: [a]\n    topic-pattern: a.*", "pipelines[0].topic-pattern: set with topics"},
		{"topic-refresh: 1s\n    topics: [a]", "pipelines[0].topic-refresh: only with topic-pattern"},
		{"group-protocol: classic", "pipelines[0].topics: required: the topics to consume (or a topic-pattern)"},
	} {
		_, err := parseRunFile("f.yaml", []byte(strings.Replace(base, "SRC", tc.src, 1)), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.src, err, tc.want)
		}
	}
	file := clitest.WriteFile(t, "pat.yaml", strings.Replace(base, "SRC", `topic-pattern: 'orders\..*'`, 1))
	code, out, errOut := runCmd(t, "run", "--check", "-c", file)
	if code != 0 || !strings.Contains(out, `topics matching orders\..*, listed every 30s (not their dead-letter topics)`) {
		t.Errorf("--check: exit %d\n%s%s", code, out, errOut)
	}
}
