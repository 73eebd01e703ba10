package console_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationTopicPageScale: the first page of a topic of 50,000
// letters counts them all and holds one page of rows; the test logs the
// time and the peak heap of the server (figures, not assertions).
func TestIntegrationTopicPageScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const n = 50_000
	c, dlq := letters(t, 0)
	cl := c.Client(t, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := []byte(strings.Repeat("x", 1000))
	var rs []*kgo.Record
	for i := range n {
		f := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: deadletter.ReasonPermanent, Class: "permanent",
			Message: fmt.Sprintf("order %d rejected", i), Topic: "orders", Offset: int64(i)}
		rs = append(rs, &kgo.Record{Topic: dlq, Value: value, Headers: kafkatest.Headers(f.AppendHeaders(nil))})
		if len(rs) == 5000 {
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			rs = rs[:0]
		}
	}
	base := newServer(t, c, console.Config{})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	start := time.Now()
	code, body, _ := get(t, base+"/topics/"+dlq, true)
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`<strong id="total">%d</strong>`, n)) {
		t.Fatalf("topic page: %d, no total of %d", code, n)
	}
	if rows := strings.Count(body, `name="letter"`); rows != console.DefaultPageSize {
		t.Errorf("%d rows, want one page of %d", rows, console.DefaultPageSize)
	}
	top := body[strings.Index(body, `id="top"`):]
	if top := strings.Count(top[:strings.Index(top, "</table>")], "<tr>"); top != 10 {
		t.Errorf("%d top errors listed, want 10", top)
	}
	t.Logf("%d letters of 1 KB: first page in %v, heap in use %d MB before, peak %d MB (the producer's records included)",
		n, took.Round(time.Millisecond), before.HeapInuse>>20, peak.Load()>>20)
}
