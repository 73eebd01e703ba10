package run

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/cmd/antidote/sinkpb"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// fakeSink is an in-process antidote.sink.v1.Sink.
type fakeSink struct {
	sinkpb.UnimplementedSinkServer
	mu      sync.Mutex
	records []*sinkpb.Record
	calls   []int // records per HandleBatch call
	md      []metadata.MD
	handle  func(*sinkpb.Record) error
	wait    func(context.Context) error // called first by Handle, with the call's context; its error is the call's
	batch   func([]*sinkpb.Record) (*sinkpb.HandleBatchResponse, error)
}

func (f *fakeSink) Handle(ctx context.Context, req *sinkpb.HandleRequest) (*sinkpb.HandleResponse, error) {
	if f.wait != nil {
		if err := f.wait(ctx); err != nil {
			return nil, err
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.records = append(f.records, req.GetRecord())
	f.md = append(f.md, md)
	f.mu.Unlock()
	if f.handle != nil {
		return &sinkpb.HandleResponse{}, f.handle(req.GetRecord())
	}
	return &sinkpb.HandleResponse{}, nil
}

func (f *fakeSink) HandleBatch(_ context.Context, req *sinkpb.HandleBatchRequest) (*sinkpb.HandleBatchResponse, error) {
	f.mu.Lock()
	f.records = append(f.records, req.GetRecords()...)
	f.calls = append(f.calls, len(req.GetRecords()))
	f.mu.Unlock()
	if f.batch != nil {
		return f.batch(req.GetRecords())
	}
	return &sinkpb.HandleBatchResponse{Results: make([]*sinkpb.Result, len(req.GetRecords()))}, nil
}

// newTestGRPCSink serves f on loopback and returns a sink of cfg on it.
func newTestGRPCSink(t *testing.T, f *fakeSink, cfg runGRPC, opts ...grpc.ServerOption) sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	sinkpb.RegisterSinkServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cfg.Target = ln.Addr().String()
	s, err := newGRPCSinkFor(&cfg, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func withRetryInfo(code codes.Code, msg string, d time.Duration) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// TestGRPCSinkStatuses: each status code settles the record as the
// contract says, the service's message is in the error (escaped), and a
// RetryInfo sets the wait (capped at ten minutes).
func TestGRPCSinkStatuses(t *testing.T) {
	var next error
	f := &fakeSink{handle: func(*sinkpb.Record) error { return next }}
	s := newTestGRPCSink(t, f, runGRPC{})
	for _, tc := range []struct {
		err   error
		class string // processed, permanent, transient
		wait  time.Duration
	}{
		{nil, "processed", 0},
		{status.Error(codes.AlreadyExists, "dup"), "processed", 0},
		{status.Error(codes.InvalidArgument, "amount must be positive\x1b[2J"), "permanent", 0},
		{status.Error(codes.FailedPrecondition, "x"), "permanent", 0},
		{status.Error(codes.NotFound, "x"), "permanent", 0},
		{status.Error(codes.OutOfRange, "x"), "permanent", 0},
		{status.Error(codes.Unavailable, "x"), "transient", 0},
		{status.Error(codes.DeadlineExceeded, "x"), "transient", 0},
		{status.Error(codes.Aborted, "x"), "transient", 0},
		{status.Error(codes.Internal, "x"), "transient", 0},
		{status.Error(codes.Unauthenticated, "x"), "transient", 0},
		{withRetryInfo(codes.ResourceExhausted, "slow", 1500*time.Millisecond), "transient", 1500 * time.Millisecond},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5000000 vs. 4194304)"), "permanent", 0},
		{withRetryInfo(codes.Unavailable, "later", 5*time.Hour), "transient", maxRetryAfter},
	} {
		next = tc.err
		err := s.handle(context.Background(), hostileRecord())
		got := "processed"
		switch {
		case err == nil:
		case failure.IsPermanent(err):
			got = "permanent"
		case failure.IsTransient(err):
			got = "transient"
		default:
			got = "unclassified: " + err.Error()
		}
		if got != tc.class {
			t.Errorf("%v: %s (%v), want %s", tc.err, got, err, tc.class)
			continue
		}
		if d, _ := failure.RetryAfterOf(err); d != tc.wait {
			t.Errorf("%v: wait %v, want %v", tc.err, d, tc.wait)
		}
		var se *GRPCStatusError
		if err != nil && (!errors.As(err, &se) || se.Code != status.Code(tc.err) || strings.Contains(err.Error(), "\x1b")) {
			t.Errorf("%v: error %q (%T): want a *GRPCStatusError with the code, escaped", tc.err, err, err)
		}
	}
}

// TestGRPCSinkRecord: the record arrives byte for byte: hostile keys and
// header names and values, a null key and a null header value absent, the
// place, timestamp, attempt and content type; the metadata of the file is
// sent with each call.
func TestGRPCSinkRecord(t *testing.T) {
	f := &fakeSink{}
	s := newTestGRPCSink(t, f, runGRPC{Metadata: map[string]string{"authorization": "Bearer t0k"}})
	r := hostileRecord()
	if err := s.handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	nullKey := hostileRecord()
	nullKey.Raw.Key, nullKey.Key = nil, nil
	if err := s.handle(context.Background(), nullKey); err != nil {
		t.Fatal(err)
	}
	got := f.records[0]
	if got.GetTopic() != "orders" || got.GetPartition() != 3 || got.GetOffset() != 1234 || got.GetAttempt() != 2 ||
		got.GetTimestampMs() != r.Raw.Timestamp.UnixMilli() || got.GetContentType() != "application/json" || string(got.GetValue()) != `{"id":1}` {
		t.Errorf("record %v", got)
	}
	if got.Key == nil || string(got.Key) != string(r.Raw.Key) {
		t.Errorf("key %q, want %q", got.Key, r.Raw.Key)
	}
	if len(got.GetHeaders()) != len(r.Raw.Headers) {
		t.Fatalf("headers %v", got.GetHeaders())
	}
	for i, h := range r.Raw.Headers {
		g := got.GetHeaders()[i]
		if string(g.GetName()) != h.Key || (h.Value == nil) != (g.Value == nil) || string(g.Value) != string(h.Value) {
			t.Errorf("header %d: %q=%q (present %v), want %q=%q", i, g.GetName(), g.Value, g.Value != nil, h.Key, h.Value)
		}
	}
	if f.records[1].Key != nil {
		t.Errorf("a null key arrived as %q, want it absent", f.records[1].Key)
	}
	tomb := hostileRecord()
	tomb.Raw.Value, tomb.Value = nil, nil
	if err := s.handle(context.Background(), tomb); err != nil {
		t.Fatal(err)
	}
	if v := f.records[2].Value; v != nil {
		t.Errorf("a tombstone's value arrived as %q, want it absent", v)
	}
	if v := f.md[0].Get("authorization"); len(v) != 1 || v[0] != "Bearer t0k" {
		t.Errorf("metadata authorization %v", v)
	}
}

// TestGRPCSinkBatch: HandleBatch settles each record from its Result; a
// status of the whole call settles every record; results that do not match
// the request (count, code) refuse the call as permanent, so that the
// records go again alone; a batch over batch.bytes is split, in order.
func TestGRPCSinkBatch(t *testing.T) {
	f := &fakeSink{}
	s := newTestGRPCSink(t, f, runGRPC{Batch: &runBulkBatch{}}).(*grpcBatchSink)
	f.batch = func(rs []*sinkpb.Record) (*sinkpb.HandleBatchResponse, error) {
		out := &sinkpb.HandleBatchResponse{}
		for _, r := range rs {
			switch r.GetOffset() {
			case 11:
				out.Results = append(out.Results, &sinkpb.Result{Code: int32(codes.InvalidArgument), Message: "bad amount"})
			case 12:
				out.Results = append(out.Results, &sinkpb.Result{Code: int32(codes.Unavailable), RetryAfterMs: 700})
			case 13:
				out.Results = append(out.Results, &sinkpb.Result{Code: int32(codes.AlreadyExists)})
			default:
				out.Results = append(out.Results, &sinkpb.Result{})
			}
		}
		return out, nil
	}
	err := s.handleBatch(context.Background(), docRecords(4)) // offsets 10..13
	var be *consumer.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 2 {
		t.Fatalf("handleBatch: %v: want records 1 and 2 failed", err)
	}
	if !failure.IsPermanent(be.Errs[1]) || !strings.Contains(be.Errs[1].Error(), "InvalidArgument: bad amount") {
		t.Errorf("record 1: %v", be.Errs[1])
	}
	if d, ok := failure.RetryAfterOf(be.Errs[2]); !ok || d != 700*time.Millisecond {
		t.Errorf("record 2: %v (wait %v)", be.Errs[2], d)
	}

	for _, tc := range []struct {
		name  string
		batch func([]*sinkpb.Record) (*sinkpb.HandleBatchResponse, error)
		check func(error) bool
	}{
		{"whole unavailable", func([]*sinkpb.Record) (*sinkpb.HandleBatchResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		}, failure.IsTransient},
		{"whole invalid", func([]*sinkpb.Record) (*sinkpb.HandleBatchResponse, error) {
			return nil, status.Error(codes.InvalidArgument, "unreadable")
		}, failure.IsPermanent},
		{"count", func([]*sinkpb.Record) (*sinkpb.HandleBatchResponse, error) {
			return &sinkpb.HandleBatchResponse{Results: []*sinkpb.Result{{}}}, nil
		}, func(err error) bool {
			return failure.IsPermanent(err) && strings.Contains(err.Error(), "1 results for 4 records")
		}},
		{"code", func(rs []*sinkpb.Record) (*sinkpb.HandleBatchResponse, error) {
			out := &sinkpb.HandleBatchResponse{Results: make([]*sinkpb.Result, len(rs))}
			for i := range out.Results {
				out.Results[i] = &sinkpb.Result{Code: 99}
			}
			return out, nil
		}, func(err error) bool { return failure.IsPermanent(err) && strings.Contains(err.Error(), "code 99") }},
	} {
		f.batch = tc.batch
		err := s.handleBatch(context.Background(), docRecords(4))
		if errors.As(err, &be) || !tc.check(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	f2 := &fakeSink{}
	s2 := newTestGRPCSink(t, f2, runGRPC{Batch: &runBulkBatch{Bytes: 1024}}).(*grpcBatchSink)
	batch := docRecords(20)
	for _, r := range batch {
		r.Value = []byte(`{"pad":"` + strings.Repeat("x", 200) + `"}`)
	}
	if err := s2.handleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(f2.calls) < 4 {
		t.Errorf("%d calls for 20 records of ~250 bytes under 1024 bytes", len(f2.calls))
	}
	for i, r := range f2.records {
		if r.GetOffset() != int64(10+i) {
			t.Fatalf("record %d has offset %d: out of order or repeated", i, r.GetOffset())
		}
	}
}

// TestGRPCSinkConfig: the grpc keys are checked, and --check says where
// the records go without showing metadata values.
func TestGRPCSinkConfig(t *testing.T) {
	const base = `kafka:
  brokers: [127.0.0.1:9092]
pipelines:
  - name: svc
    topics: [orders]
    group: svc
    value:
      format: json
    sink:
      grpc:
        target: 127.0.0.1:50051
`
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no target", strings.Replace(base, "        target: 127.0.0.1:50051\n", "        timeout: 1s\n", 1), "pipelines[0].sink.grpc.target: required"},
		{"url", strings.Replace(base, "127.0.0.1:50051", "http://127.0.0.1:50051", 1), "a gRPC target is host:port"},
		{"keepalive", base + "        keepalive: 1s\n", "pipelines[0].sink.grpc.keepalive: 1s: at least 10s"},
		{"metadata", base + "        metadata: {Authorization: x}\n", `pipelines[0].sink.grpc.metadata.Authorization: "Authorization" is not a gRPC metadata key`},
		{"grpc-", base + "        metadata: {grpc-timeout: x}\n", "keys that start with grpc- are gRPC's own"},
		{"batch", base + "        batch: {bytes: 1}\n", "pipelines[0].sink.grpc.batch.bytes: 1: at least 1024"},
		{"typo", base + "        targte: x\n", "pipelines[0].sink.grpc.targte: unknown key (did you mean target?)"},
		{"two sinks", base + "      kafka: {topic: x}\n", "one sink per pipeline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
	file := clitest.WriteFile(t, "grpc.yaml", base+"        metadata: {authorization: Bearer s3cr3t}\n        batch: {size: 100}\n")
	code, out, errOut := runCmd(t, "run", "--check", "-c", file)
	if code != 0 {
		t.Fatalf("--check: exit %d: %s", code, errOut)
	}
	want := "grpc antidote.sink.v1.Sink/HandleBatch at 127.0.0.1:50051 in batches of at most 100 records or 4194304 bytes, linger 50ms (plaintext, timeout 10s, at most 64 calls at once, keepalive 30s), values application/json, metadata authorization (values not shown)"
	if !strings.Contains(out, want) || strings.Contains(out, "s3cr3t") {
		t.Errorf("--check printed:\n%s\nwant the line %q and no secret", out, want)
	}
}

// TestGRPCSinkDeadline: a call that outlives the sink's timeout ends with
// DEADLINE_EXCEEDED, a transient failure (the record is tried again, never
// dead-lettered for it), and the service sees the deadline.
func TestGRPCSinkDeadline(t *testing.T) {
	deadlines := make(chan time.Duration, 1)
	f := &fakeSink{wait: func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			d = time.Now().Add(time.Hour) // no deadline: far past the timeout
		}
		deadlines <- time.Until(d)
		<-ctx.Done()
		// The service's own deadline may pass a moment before the
		// client's: it answers as a gRPC server does then.
		return status.FromContextError(ctx.Err()).Err()
	}}
	s := newTestGRPCSink(t, f, runGRPC{Timeout: 200 * time.Millisecond})
	err := s.handle(context.Background(), docRecords(1)[0])
	var se *GRPCStatusError
	if !errors.As(err, &se) || se.Code != codes.DeadlineExceeded {
		t.Fatalf("a call past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	if c := failure.Classify(err); c != failure.ClassTransient {
		t.Errorf("class %v, want transient", c)
	}
	select {
	case d := <-deadlines:
		if d > 200*time.Millisecond {
			t.Errorf("the service saw a deadline %v away, want one within the 200ms timeout", d)
		}
	default:
		// The call ended before the service ran: the deadline is the
		// client's alone, which the status above shows.
	}
}

// TestGRPCSinkTLS: with tls.ca-file, the sink calls a service whose
// certificate that CA signed; without it, the service's certificate is
// refused, a transient failure (the partition waits rather than dead-letter).
func TestGRPCSinkTLS(t *testing.T) {
	ca := kafkatest.NewCA(t)
	caFile := ca.File()
	creds := grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "127.0.0.1")))
	f := &fakeSink{}
	s := newTestGRPCSink(t, f, runGRPC{TLS: &cli.TLSConfig{CAFile: caFile}}, creds)
	if err := s.handle(context.Background(), docRecords(1)[0]); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if !strings.Contains(s.describe(), "TLS") {
		t.Errorf("describe: %q, want it to say TLS", s.describe())
	}
	plain := newTestGRPCSink(t, &fakeSink{}, runGRPC{TLS: &cli.TLSConfig{}}, creds)
	err := plain.handle(context.Background(), docRecords(1)[0])
	if err == nil || failure.Classify(err) != failure.ClassTransient {
		t.Errorf("without the CA: %v, want a transient failure", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.records) != 1 {
		t.Errorf("the service got %d records, want 1 (the call with the CA)", len(f.records))
	}
}
