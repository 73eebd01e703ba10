package run

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/sinkpb"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// The gRPC sink calls a service that implements antidote.sink.v1.Sink
// (proto/antidote/sink/v1/sink.proto, Go stubs in cmd/antidote/sinkpb):
// Handle with one record, or, with grpc.batch set, HandleBatch with many
// records of a partition. The status code settles a record (or a whole
// batch call): OK and ALREADY_EXISTS processed; INVALID_ARGUMENT,
// FAILED_PRECONDITION, NOT_FOUND and OUT_OF_RANGE permanent; every other
// code transient, with the wait of a google.rpc.RetryInfo detail when the
// status has one. In a batch answer, each Result's code settles its record.

// runGRPC is the gRPC sink's configuration.
type runGRPC struct {
	Target      string            `yaml:"target"` // host:port, or a gRPC name such as dns:///host:port
	Timeout     time.Duration     `yaml:"timeout"`
	Concurrency int               `yaml:"concurrency"`
	Metadata    map[string]string `yaml:"metadata"`
	TLS         *cli.TLSConfig    `yaml:"tls"`
	Keepalive   time.Duration     `yaml:"keepalive"`
	Batch       *runBulkBatch     `yaml:"batch"`
}

// Defaults of the gRPC sink.
const (
	defaultGRPCTimeout   = 10 * time.Second
	defaultGRPCKeepalive = 30 * time.Second
)

// grpcSink is the gRPC sink of one pipeline.
type grpcSink struct {
	target      string
	conn        *grpc.ClientConn
	client      sinkpb.SinkClient
	timeout     time.Duration
	sem         chan struct{}
	md          metadata.MD
	contentType string
	tls         bool
	keepalive   time.Duration
}

// grpcBatchSink is the gRPC sink of a pipeline with grpc.batch.
type grpcBatchSink struct {
	*grpcSink
	size   int
	bytes  int
	linger time.Duration
}

// newGRPCSinkFor builds the sink of c: a batching one when c.Batch is set.
func newGRPCSinkFor(c *runGRPC, contentType string) (sink, error) {
	s, err := newGRPCSink(c, contentType)
	if err != nil || c.Batch == nil {
		return s, err
	}
	return &grpcBatchSink{
		grpcSink: s,
		size:     int(cmpInt(int64(c.Batch.Size), defaultHTTPBatchSize)),
		bytes:    int(cmpInt(c.Batch.Bytes, defaultHTTPBatchBytes)),
		linger:   cmpDur(c.Batch.Linger, defaultBulkLinger),
	}, nil
}

func newGRPCSink(c *runGRPC, contentType string) (*grpcSink, error) {
	s := &grpcSink{
		target:      c.Target,
		timeout:     cmpDur(c.Timeout, defaultGRPCTimeout),
		sem:         make(chan struct{}, cmpInt(int64(c.Concurrency), defaultHTTPConcurrency)),
		md:          metadata.New(c.Metadata),
		contentType: contentType,
		tls:         c.TLS != nil,
		keepalive:   cmpDur(c.Keepalive, defaultGRPCKeepalive),
	}
	creds := insecure.NewCredentials()
	if c.TLS != nil {
		cfg, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(c.Target,
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: s.keepalive, Timeout: min(s.timeout, 20*time.Second)}),
		// The policy retries: a failed call is the record's transient
		// failure, retried with the pipeline's backoff.
		grpc.WithDisableRetry(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxBatchResponse)),
	)
	if err != nil {
		return nil, fmt.Errorf("grpc target %q: %w", cli.Safe(c.Target), err)
	}
	s.conn, s.client = conn, sinkpb.NewSinkClient(conn)
	return s, nil
}

func (s *grpcSink) describe() string {
	return fmt.Sprintf("grpc antidote.sink.v1.Sink/Handle at %s (%s, timeout %v, at most %d calls at once, keepalive %v)",
		s.target, s.security(), s.timeout, cap(s.sem), s.keepalive)
}

func (s *grpcSink) security() string {
	if s.tls {
		return "TLS"
	}
	return "plaintext"
}

func (s *grpcSink) close() { _ = s.conn.Close() }

// record is the message of r.
func (s *grpcSink) record(r *consumer.Record[[]byte, []byte]) *sinkpb.Record {
	raw := r.Raw
	m := &sinkpb.Record{
		Topic:       raw.Topic,
		Partition:   raw.Partition,
		Offset:      raw.Offset,
		TimestampMs: raw.Timestamp.UnixMilli(),
		Key:         r.Key, // decoded with key.format, or as fetched
		ContentType: s.contentType,
		Attempt:     int32(max(r.Attempt, 1)),
	}
	if raw.Value != nil {
		m.Value = r.Value
		if m.Value == nil {
			m.Value = []byte{} // present: empty after decoding
		}
	}
	for _, h := range raw.Headers {
		m.Headers = append(m.Headers, &sinkpb.Header{Name: []byte(h.Key), Value: h.Value})
	}
	return m
}

// call runs one call with the sink's deadline, metadata and cap on calls
// in flight.
func (s *grpcSink) call(ctx context.Context, f func(ctx context.Context) error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if len(s.md) > 0 {
		rctx = metadata.NewOutgoingContext(rctx, s.md)
	}
	err := f(rctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // stopping or revoked: the record stays unsettled
	}
	return err
}

// handle sends one record and classifies the status.
func (s *grpcSink) handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error {
	err := s.call(ctx, func(ctx context.Context) error {
		_, err := s.client.Handle(ctx, &sinkpb.HandleRequest{Record: s.record(r)})
		return err
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	st, _ := status.FromError(err)
	return grpcOutcome(st.Code(), st.Message(), retryDelay(st), s.target, "Handle")
}

// GRPCStatusError is the failure of a record the service settled with a
// status code other than OK (or ALREADY_EXISTS). Its type names the dead
// letters of such records.
type GRPCStatusError struct {
	Code codes.Code
	msg  string
}

func (e *GRPCStatusError) Error() string { return e.msg }

// grpcOutcome classifies a status code: nil for processed, else an error
// marked transient (with the service's retry delay, when it gave one) or
// permanent.
func grpcOutcome(code codes.Code, msg string, delay time.Duration, target, method string) error {
	switch code {
	case codes.OK, codes.AlreadyExists:
		return nil
	}
	text := fmt.Sprintf("grpc %s %s: %s", target, method, code)
	if m := strings.TrimSpace(cli.Safe(msg)); m != "" {
		m = truncate(m, errorBodyBytes)
		text += ": " + m
	}
	err := &GRPCStatusError{Code: code, msg: text}
	switch {
	case code == codes.InvalidArgument, code == codes.FailedPrecondition, code == codes.NotFound, code == codes.OutOfRange:
		return failure.Permanent(err)
	case code == codes.ResourceExhausted && strings.Contains(msg, "larger than max"):
		// A message over a side's size limit (gRPC's own words): no
		// retry makes it fit. A batch goes again record by record; a
		// record alone that is too large is dead-lettered.
		return failure.Permanent(err)
	}
	if delay > 0 {
		return failure.RetryAfter(min(delay, maxRetryAfter), err)
	}
	return failure.Transient(err)
}

// retryDelay is the wait of the status's google.rpc.RetryInfo, 0 without.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if v := ri.GetRetryDelay(); v.IsValid() && v.AsDuration() > 0 {
				return v.AsDuration()
			}
		}
	}
	return 0
}

func (s *grpcBatchSink) describe() string {
	return fmt.Sprintf("grpc antidote.sink.v1.Sink/HandleBatch at %s in batches of at most %d records or %d bytes, linger %v (%s, timeout %v, at most %d calls at once, keepalive %v)",
		s.target, s.size, s.bytes, s.linger, s.security(), s.timeout, cap(s.sem), s.keepalive)
}

func (s *grpcBatchSink) batching() consumer.Batching {
	return consumer.Batching{Size: s.size, Linger: s.linger}
}

// handle sends one record: a batch of one.
func (s *grpcBatchSink) handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error {
	return oneOfBatch(s.handleBatch(ctx, []*consumer.Record[[]byte, []byte]{r}))
}

// handleBatch sends the records of one partition: one call, or several
// when the request would pass the byte limit.
func (s *grpcBatchSink) handleBatch(ctx context.Context, batch []*consumer.Record[[]byte, []byte]) error {
	errs := map[int]error{}
	var req *sinkpb.HandleBatchRequest
	var idx []int
	size := 0
	send := func() error {
		if len(idx) == 0 {
			return nil
		}
		err := s.send(ctx, req, idx, errs)
		req, idx, size = nil, nil, 0
		return err
	}
	for i, r := range batch {
		m := s.record(r)
		n := proto.Size(m) + 8 // with its tag and length
		if len(idx) > 0 && size+n > s.bytes {
			if err := send(); err != nil {
				return err
			}
		}
		if req == nil {
			req = &sinkpb.HandleBatchRequest{}
		}
		req.Records = append(req.Records, m)
		idx = append(idx, i)
		size += n
	}
	if err := send(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &consumer.BatchError{Errs: errs}
	}
	return nil
}

// send makes one HandleBatch call of the records idx (indexes into the
// batch) and records each record's failure in errs; an error is the
// call's, failing every record of the batch.
func (s *grpcBatchSink) send(ctx context.Context, req *sinkpb.HandleBatchRequest, idx []int, errs map[int]error) error {
	var resp *sinkpb.HandleBatchResponse
	err := s.call(ctx, func(ctx context.Context) (err error) {
		resp, err = s.client.HandleBatch(ctx, req)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st, _ := status.FromError(err)
		if st.Code() == codes.AlreadyExists {
			return nil
		}
		return grpcOutcome(st.Code(), st.Message(), retryDelay(st), s.target, "HandleBatch")
	}
	rs := resp.GetResults()
	if len(rs) != len(idx) {
		// The service answered something other than the contract: each
		// record goes again alone, and then is dead-lettered with this.
		return failure.Permanent(&GRPCStatusError{Code: codes.OK, msg: fmt.Sprintf("grpc %s HandleBatch: %d results for %d records", s.target, len(rs), len(idx))})
	}
	for k, res := range rs {
		if c := res.GetCode(); c < 0 || c > int32(codes.Unauthenticated) {
			return failure.Permanent(&GRPCStatusError{Code: codes.OK, msg: fmt.Sprintf("grpc %s HandleBatch: result %d: code %d is not a gRPC status code", s.target, k, c)})
		}
	}
	for k, res := range rs {
		delay := time.Duration(min(max(res.GetRetryAfterMs(), 0), int64(maxRetryAfter/time.Millisecond))) * time.Millisecond
		if e := grpcOutcome(codes.Code(res.GetCode()), res.GetMessage(), delay, s.target, "HandleBatch"); e != nil {
			errs[idx[k]] = e
		}
	}
	return nil
}

// describeGRPC is what --check prints about the gRPC sink: the sink's own
// description, built without connecting.
func describeGRPC(c *runGRPC, format string) string {
	s := &grpcSink{
		target:    c.Target,
		timeout:   cmpDur(c.Timeout, defaultGRPCTimeout),
		sem:       make(chan struct{}, cmpInt(int64(c.Concurrency), defaultHTTPConcurrency)),
		tls:       c.TLS != nil,
		keepalive: cmpDur(c.Keepalive, defaultGRPCKeepalive),
	}
	d := ""
	if c.Batch == nil {
		d = s.describe()
	} else {
		d = (&grpcBatchSink{grpcSink: s, size: int(cmpInt(int64(c.Batch.Size), defaultHTTPBatchSize)),
			bytes: int(cmpInt(c.Batch.Bytes, defaultHTTPBatchBytes)), linger: cmpDur(c.Batch.Linger, defaultBulkLinger)}).describe()
	}
	d += ", values " + contentTypes[format]
	if len(c.Metadata) > 0 {
		keys := make([]string, 0, len(c.Metadata))
		for k := range c.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d += ", metadata " + strings.Join(keys, ", ") + " (values not shown)"
	}
	return d
}
