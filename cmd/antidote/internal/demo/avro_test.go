package demo

import (
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDemoAvro runs the Avro demo: Avro poison pills, refunds skipped, and
// the schema registry down for 1s while records of a schema version the
// consumer has not fetched arrive.
func TestDemoAvro(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, append(slices.Clone(shortDemo), "--format", "avro")...)
	s := checkDemoSummary(t, code, stdout, stderr)
	if s.Format != "avro" || !strings.HasPrefix(s.Registry, "http://127.0.0.1:") {
		t.Errorf("format %q, registry %q", s.Format, s.Registry)
	}

	// Each Avro poison pill is dead-lettered with its error type; refunds
	// are skipped, and the skips match the refunds produced.
	want := map[string]string{
		"garbage":        "dead-lettered/deserialize-value/permanent/*avro.WireError",
		"empty":          "dead-lettered/deserialize-value/permanent/*avro.WireError",
		"no-magic":       "dead-lettered/deserialize-value/permanent/*avro.WireError",
		"unknown-schema": "dead-lettered/deserialize-value/permanent/*avro.UnknownSchemaError",
		"truncated-avro": "dead-lettered/deserialize-value/permanent/*avro.DecodeError",
		"unknown-type":   "skipped",
	}
	for _, k := range s.ByKind {
		if k.Kind == "truncated-json" || k.Kind == "wrong-shape-json" {
			t.Errorf("kind %s in the Avro demo", k.Kind)
		}
		if w, ok := want[k.Kind]; ok {
			if k.Outcomes[w] != k.Records {
				t.Errorf("kind %s: outcomes %v, want all %d %s", k.Kind, k.Outcomes, k.Records, w)
			}
			if k.Kind == "unknown-type" && k.Records != s.Skipped {
				t.Errorf("%d refunds produced, %d skipped", k.Records, s.Skipped)
			}
			delete(want, k.Kind)
		}
	}
	if len(want) > 0 {
		t.Errorf("kinds not produced: %v", want)
	}
	if s.Skipped == 0 || s.Consumer.Skipped != uint64(s.Skipped) {
		t.Errorf("skipped %d, consumer counter %d", s.Skipped, s.Consumer.Skipped)
	}

	// The registry outage: records waited, nothing dead-lettered (checked
	// above), and the circuit breaker kept the requests to a few.
	o := s.Outage
	if o == nil {
		t.Fatal("no outage")
	}
	if o.Dependency != "schema registry" || o.RecordsWaited == 0 {
		t.Errorf("outage %+v: want the schema registry, with records waiting", *o)
	}
	const partitions, outage = 4, time.Second
	bound := int64(partitions + outage/registryProbe + 3)
	if o.RegistryRequests == nil || *o.RegistryRequests == 0 || *o.RegistryRequests > bound {
		t.Errorf("registry requests during the outage: %v, want 1..%d", o.RegistryRequests, bound)
	}
	t.Logf("outage: %d records waited, %d failed lookups, %d registry requests, recovered in %dms",
		o.RecordsWaited, o.FailedCalls, *o.RegistryRequests, o.RecoveredMS)
}

// TestDemoAvroTable checks the human output of the Avro demo tells the
// registry's story.
func TestDemoAvroTable(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, "demo", "--format", "avro", "--records", "1000", "--produce-for", "500ms", "--outage", "500ms")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"schema registry at http://127.0.0.1:", "schema registry DOWN", "circuit breaker open",
		"registry up (breaker closed)", "UP again", "circuit breaker closed",
		"dead-lettered: deserialize-value, permanent, *avro.UnknownSchemaError", "skipped: no Go type for them",
		"OUTAGE (the schema registry", "registry requests", "dead-lettered by it", "after the registry came back", "nothing lost"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestDemoBadFormat(t *testing.T) {
	code, _, stderr := runCmd(t, "demo", "--format", "xml")
	clitest.CheckOneLineError(t, code, cli.ExitUsage, stderr, `--format "xml": must be json or avro`)
}
