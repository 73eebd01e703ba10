package otel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/antidote-kafka/antidote/internal/kafkatest"
	antiotel "github.com/antidote-kafka/antidote/trace/otel"
)

// The environment of the collector test (scripts/collector.sh env).
const (
	// EnvOTLPEndpoint is the OTLP/HTTP URL of a running OpenTelemetry
	// Collector, e.g. http://127.0.0.1:39311.
	envOTLPEndpoint = "ANTIDOTE_OTLP_ENDPOINT"
	// EnvOTLPFile is the file its file exporter writes the spans to.
	envOTLPFile = "ANTIDOTE_OTLP_FILE"
)

// TestIntegrationCollector runs the scenario with spans exported over OTLP
// to a real OpenTelemetry Collector (scripts/collector.sh), reads them back
// from the file its file exporter writes, and checks them as the in-memory
// test does: against the cluster of kafkatest (the real broker of make
// test), then against kfake. It skips unless ANTIDOTE_OTLP_ENDPOINT and
// ANTIDOTE_OTLP_FILE are set.
func TestIntegrationCollector(t *testing.T) {
	endpoint, file := os.Getenv(envOTLPEndpoint), os.Getenv(envOTLPFile)
	if endpoint == "" || file == "" {
		t.Skipf("%s and %s are not set: no collector (scripts/collector.sh start; eval \"$(scripts/collector.sh env)\")", envOTLPEndpoint, envOTLPFile)
	}
	for _, tc := range []struct {
		name    string
		cluster func(t *testing.T) *kafkatest.Cluster
	}{
		{"kafkatest", func(t *testing.T) *kafkatest.Cluster { return kafkatest.New(t) }},
		{"kfake", func(t *testing.T) *kafkatest.Cluster { return kafkatest.NewVirtual(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cluster(t)
			t.Logf("on %s, exporting to %s", c.Kind(), endpoint)
			ctx := context.Background()
			exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
			if err != nil {
				t.Fatal(err)
			}
			// The spans go to the collector and to memory: what was sent
			// is what must be read back.
			mem := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)), sdktrace.WithSyncer(mem))
			sc := runScenario(t, c, antiotel.NewTracer(antiotel.TracerProvider(tp)), nil)
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := tp.ForceFlush(sctx); err != nil { // the batch, to the collector
				t.Fatalf("exporting to the collector: %v", err)
			}
			sent := map[string]bool{}
			for _, s := range fromStubs(mem.GetSpans()) {
				sent[s.ID] = true
			}
			if err := tp.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			if len(sent) == 0 {
				t.Fatal("no span sent")
			}
			var got []gotSpan
			kafkatest.WaitFor(t, time.Minute, "the collector wrote every span sent", func() bool {
				got = readCollectorFile(t, file, sent)
				return len(got) == len(sent)
			})
			t.Logf("%d spans read back from the collector", len(got))
			checkScenario(t, sc, got, false)
		})
	}
}

// readCollectorFile reads the spans of the file exporter's file (OTLP JSON,
// one export request a line) whose span ids are in want.
func readCollectorFile(t *testing.T, path string, want map[string]bool) []gotSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the collector's file: %v", err)
	}
	defer f.Close()
	var out []gotSpan
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var req otlpRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			continue // a line being written
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if !want[s.SpanID] || seen[s.SpanID] {
						continue
					}
					seen[s.SpanID] = true
					g := gotSpan{Name: s.Name, Trace: s.TraceID, ID: s.SpanID, Parent: s.ParentSpanID,
						Attrs: map[string]string{}, Error: s.Status.Code == 2}
					for _, a := range s.Attributes {
						g.Attrs[a.Key] = a.Value.String()
					}
					for _, l := range s.Links {
						g.Links = append(g.Links, l.SpanID)
						g.LinkedTo = append(g.LinkedTo, l.TraceID)
					}
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// otlpRequest is the part of an OTLP JSON ExportTraceServiceRequest the
// test reads. Ids are hex, as OTLP JSON has them.
type otlpRequest struct {
	ResourceSpans []struct {
		ScopeSpans []struct {
			Spans []struct {
				TraceID      string `json:"traceId"`
				SpanID       string `json:"spanId"`
				ParentSpanID string `json:"parentSpanId"`
				Name         string `json:"name"`
				Attributes   []struct {
					Key   string    `json:"key"`
					Value otlpValue `json:"value"`
				} `json:"attributes"`
				Links []struct {
					TraceID string `json:"traceId"`
					SpanID  string `json:"spanId"`
				} `json:"links"`
				Status struct {
					Code int `json:"code"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

// otlpValue is an OTLP JSON AnyValue of the kinds the spans have.
type otlpValue struct {
	Str  *string          `json:"stringValue"`
	Int  *json.RawMessage `json:"intValue"` // a string of digits in OTLP JSON
	Bool *bool            `json:"boolValue"`
}

func (v otlpValue) String() string {
	switch {
	case v.Str != nil:
		return *v.Str
	case v.Int != nil:
		return strings.Trim(string(*v.Int), `"`)
	case v.Bool != nil:
		if *v.Bool {
			return "true"
		}
		return "false"
	}
	return ""
}
