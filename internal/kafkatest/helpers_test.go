package kafkatest_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the calling goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestWaitFor: WaitFor returns once cond holds, and fails naming what it
// waited for when cond never does; the fake clock of the bubble runs the
// timeouts.
func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		polls := 0
		kafkatest.WaitFor(t, time.Minute, "the third poll", func() bool { polls++; return polls == 3 })
		if polls != 3 {
			t.Errorf("cond polled %d times, want 3", polls)
		}
		if waited := time.Since(start); waited != 40*time.Millisecond {
			t.Errorf("waited %v for the third poll, want 40ms (two 20ms pauses)", waited)
		}

		start = time.Now()
		rec := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			kafkatest.WaitFor(rec, 30*time.Second, "nothing", func() bool { return false })
		}()
		<-done
		if want := "timed out after 30s waiting for nothing"; rec.msg != want {
			t.Errorf("failure %q, want %q", rec.msg, want)
		}
		if waited := time.Since(start); waited < 30*time.Second || waited > 31*time.Second {
			t.Errorf("gave up after %v, want just over 30s", waited)
		}
	})
}

// TestLogger: the logger is silent without -v; with it, it takes warnings,
// and info lines only when ANTIDOTE_TEST_LOG=info. Debug is never on.
func TestLogger(t *testing.T) {
	ctx := context.Background()
	for _, env := range []string{"", "info"} {
		t.Run("env="+env, func(t *testing.T) {
			t.Setenv(kafkatest.EnvTestLog, env)
			l := kafkatest.Logger(t)
			want := map[slog.Level]bool{
				slog.LevelDebug: false,
				slog.LevelInfo:  testing.Verbose() && env == "info",
				slog.LevelWarn:  testing.Verbose(),
				slog.LevelError: testing.Verbose(),
			}
			for level, on := range want {
				if got := l.Enabled(ctx, level); got != on {
					t.Errorf("-v=%v, %s=%q: Enabled(%v) = %v, want %v", testing.Verbose(), kafkatest.EnvTestLog, env, level, got, on)
				}
			}
		})
	}
}

// TestProduce: Produce returns the records as the cluster took them, each
// on the partition it named and at its offset.
func TestProduce(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "produce", 2)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	out := kafkatest.Produce(t, cl,
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("a")},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("b")},
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte("c")},
	)
	var got []string
	for _, r := range out {
		got = append(got, fmt.Sprintf("%s@%d/%d", r.Value, r.Partition, r.Offset))
	}
	slices.Sort(got) // acknowledged in any order across partitions
	if g, want := strings.Join(got, " "), "a@1/0 b@1/1 c@0/0"; g != want {
		t.Errorf("produced %s, want %s", g, want)
	}
}
