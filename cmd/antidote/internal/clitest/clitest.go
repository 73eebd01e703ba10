// Package clitest is the test kit of antidote's commands: it runs a
// command tree in the process the way main does, checks the one-line error
// contract, and holds the helpers the commands' tests share. Only tests
// import it.
package clitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/sreg"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// Tree returns fresh commands to put under the root: the command a test
// is about, and the others it runs.
type Tree func() []*cobra.Command

// Execute runs the command line args on a root holding tree's commands,
// under ctx, and returns the exit code, as main does.
func Execute(ctx context.Context, tree Tree, args []string, stdout, stderr io.Writer) int {
	root := cli.NewRoot(stdout, stderr)
	root.AddCommand(tree()...)
	cli.WrapArgs(root)
	return cli.Execute(ctx, root, args)
}

// Run runs the command line and returns its exit code, stdout and stderr.
func Run(t *testing.T, tree Tree, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Execute(context.Background(), tree, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// CheckOneLineError checks the error contract: exit code, a first line
// starting with "antidote:", at most a --help hint after it, no stack trace.
func CheckOneLineError(t *testing.T, code, want int, stderr, contains string) {
	t.Helper()
	if code != want {
		t.Errorf("exit code %d, want %d (stderr %q)", code, want, stderr)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "antidote: ") {
		t.Errorf("stderr does not start with 'antidote: ': %q", stderr)
	}
	if !strings.Contains(lines[0], contains) {
		t.Errorf("stderr %q does not contain %q", lines[0], contains)
	}
	wantLines := 1
	if want == cli.ExitUsage {
		wantLines = 2
		if !strings.Contains(lines[len(lines)-1], "--help") {
			t.Errorf("usage error without a --help hint: %q", stderr)
		}
	}
	if len(lines) != wantLines {
		t.Errorf("stderr has %d lines, want %d: %q", len(lines), wantLines, stderr)
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr looks like a stack trace (%q): %q", bad, stderr)
		}
	}
}

// SyncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor polls cond every 200ms for up to d.
func WaitFor(t *testing.T, d time.Duration, what string, cond func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s\nlogs:\n%s", d, what, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WriteFile writes content to the file name of a temporary folder and
// returns its path.
func WriteFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// AntidoteHeaders are the headers of an Antidote dead letter of the record
// at topic/partition/offset, after the original headers orig.
func AntidoteHeaders(orig []kgo.RecordHeader, topic string, partition int32, offset int64) []kgo.RecordHeader {
	hs := make([]deadletter.Header, len(orig))
	for i, h := range orig {
		hs[i] = deadletter.Header{Key: h.Key, Value: h.Value}
	}
	now := time.Now().UTC()
	f := &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		ErrorType: "*json.SyntaxError", ErrorStage: "json", Message: "unexpected end of JSON input",
		Topic: topic, Partition: partition, Offset: offset, Timestamp: now.Add(-time.Hour),
		OriginalHeaders: len(orig), Group: "orders-service", Attempts: 1, First: now, Last: now,
	}
	out := []kgo.RecordHeader{}
	for _, h := range f.AppendHeaders(hs) {
		out = append(out, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return out
}

// ProduceLetters produces n Antidote letters to dlq on partition p, each with
// key k<i> and value v<i>, original offsets from 0.
func ProduceLetters(t *testing.T, cl *kgo.Client, dlq, src string, p int32, n int, orig ...kgo.RecordHeader) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: dlq, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: AntidoteHeaders(orig, src, p, int64(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// CopyHeaders copies headers, their values included.
func CopyHeaders(hs []kgo.RecordHeader) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: append([]byte{}, h.Value...)}
	}
	return out
}

// ScrapeMetrics GETs /metrics with the token and parses it with the
// Prometheus text parser.
func ScrapeMetrics(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// FamilySum sums the counters and gauges of the metric family name, over
// the series whose label has value (all of them when label is "").
func FamilySum(fams map[string]*dto.MetricFamily, name string, label, value string) float64 {
	var v float64
	for _, m := range fams[name].GetMetric() {
		ok := label == ""
		for _, l := range m.GetLabel() {
			ok = ok || (l.GetName() == label && l.GetValue() == value)
		}
		if ok {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return v
}

// Registry starts an in-process schema registry (package sreg) for the
// test, and returns its URL and a client of it.
func Registry(t testing.TB) (string, *registry.Registry) {
	t.Helper()
	srv, err := sreg.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	reg, err := registry.New(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL(), reg
}
