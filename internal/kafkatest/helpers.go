package kafkatest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// EnvTestLog names the environment variable that raises the level of Logger
// from warn to info when it is "info".
const EnvTestLog = "ANTIDOTE_TEST_LOG"

// Logger returns a logger for the code under test. It discards everything
// unless the tests run with -v; then it writes warnings and errors to
// stderr, and info lines too when ANTIDOTE_TEST_LOG=info. It writes to
// stderr rather than to t, so that a goroutine still logging after t ends
// does not panic.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelWarn
	if os.Getenv(EnvTestLog) == "info" {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Produce writes recs synchronously with cl and returns them as the cluster
// acknowledged them, partition and offset set, in the order of their
// acknowledgements (across partitions, not always the order of recs). It
// fails t on the first error and bounds the write to one minute. A record goes to the partition
// it names only when cl was built with kgo.ManualPartitioner.
func Produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce: %v", err)
	}
	out := make([]*kgo.Record, len(res))
	for i, r := range res {
		out[i] = r.Record
	}
	return out
}

// WaitFor polls cond every 20ms until it holds, and fails t when it still
// does not after timeout; what names the awaited state in that failure. It
// is the one way a test waits on a real cluster or a running consumer. In
// a testing/synctest bubble its polls advance the fake clock, so a wait
// there costs no real time.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Headers returns hs, such as the failure headers of a letter
// ([deadletter.Failure.AppendHeaders]), as a record's headers.
func Headers(hs []deadletter.Header) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}
