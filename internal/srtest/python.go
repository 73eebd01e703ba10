package srtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvPython names a Python interpreter that has confluent-kafka and its
// schema-registry serializers (scripts/python/venv.sh makes one and prints
// its path). Tests with a foreign Python producer skip without it, or fail
// with CI=true.
const EnvPython = "ANTIDOTE_PYTHON"

// Python returns the interpreter named by [EnvPython]. It skips t when the
// variable is unset, or fails it when CI=true in the test command's
// schema-registry pass (where [EnvURL] is set too): that pass installs the
// environment, so its absence there is a broken rig.
func Python(t testing.TB) string {
	t.Helper()
	py := strings.TrimSpace(os.Getenv(EnvPython))
	if py == "" {
		if os.Getenv("CI") == "true" && strings.TrimSpace(os.Getenv(EnvURL)) != "" {
			t.Fatalf("srtest: CI=true and %v", errNoPython)
		}
		t.Skipf("srtest: %v", errNoPython)
	}
	return py
}

// Producer is a foreign producer: Python's confluent-kafka with its
// AvroSerializer, JSONSerializer or ProtobufSerializer, in one long-lived
// process (scripts/python/produce.py), so that its serializers' caches of
// registered ids survive a registry outage, as a real service's would.
type Producer struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *lockedWriter
	mu     sync.Mutex
}

// Batch is one command to the [Producer].
type Batch struct {
	// Format is "avro", "json" or "protobuf".
	Format string `json:"format"`
	// Schema is the Avro schema or the JSON Schema (avro, json).
	Schema string `json:"schema,omitempty"`
	// Proto is "module:Message", a generated Python type on the proto path
	// (protobuf).
	Proto string `json:"proto,omitempty"`
	// Topic and Partition are where the records go.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Records are the values, as JSON objects.
	Records []any `json:"records"`
	// RegisterOnly serializes the records (registering the schema if it is
	// new) and produces nothing.
	RegisterOnly bool `json:"register_only,omitempty"`
}

// NewProducer starts the foreign producer on brokers and the registry r.
// protoPath, if not empty, is a folder of generated Python protobuf
// modules. The process ends with the test.
func (r *Registry) NewProducer(t testing.TB, python string, brokers []string, protoPath string) *Producer {
	t.Helper()
	args := []string{filepath.Join(RepoRoot(t), "scripts", "python", "produce.py"),
		"--brokers", strings.Join(brokers, ","), "--registry", r.url}
	if protoPath != "" {
		args = append(args, "--proto-path", protoPath)
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // no __pycache__ beside checked-in modules
	p := &Producer{cmd: cmd, stderr: &lockedWriter{}}
	cmd.Stderr = p.stderr
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 0, 64<<10), 16<<20)
	if err := cmd.Start(); err != nil {
		t.Fatalf("srtest: starting the Python producer: %v", err)
	}
	t.Cleanup(func() {
		_ = p.in.Close() // the script ends at the end of its input
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// Produce runs b and returns the schema id of each record. A failure of
// the Python side fails t with its message.
func (p *Producer) Produce(t testing.TB, b Batch) []int {
	t.Helper()
	ids, err := p.Try(b)
	if err != nil {
		t.Fatalf("srtest: Python producer: %v", err)
	}
	return ids
}

// Try is [Producer.Produce] returning the error.
func (p *Producer) Try(b Batch) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return nil, p.died(err)
	}
	type answer struct {
		IDs   []int  `json:"ids"`
		Error string `json:"error"`
	}
	got := make(chan error, 1)
	var a answer
	go func() {
		if !p.out.Scan() {
			got <- p.died(p.out.Err())
			return
		}
		got <- json.Unmarshal(p.out.Bytes(), &a)
	}()
	select {
	case err := <-got:
		if err != nil {
			return nil, err
		}
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		return nil, p.died(context.DeadlineExceeded)
	}
	if a.Error != "" {
		return nil, errors.New(a.Error)
	}
	return a.IDs, nil
}

func (p *Producer) died(err error) error {
	if err == nil {
		err = io.EOF
	}
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	return errors.New("the process ended (" + err.Error() + "): " + p.stderr.b.String())
}

// lockedWriter collects the process's stderr.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}
