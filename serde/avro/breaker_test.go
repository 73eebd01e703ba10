package avro_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// cpuTime returns the process's user+system CPU time.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBreakerOutage: with the registry refusing connections, 8 goroutines
// decoding uncached ids make a bounded number of requests (the probe
// schedule), burn little CPU, and recover on the first probe after restart.
func TestBreakerOutage(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	const workers = 8
	ids := make([]int, workers)
	data := make([][]byte, workers)
	for i := range ids {
		// Distinct schemas (a doc differs), so distinct ids, never looked up.
		s := `{"type":"record","name":"Order","namespace":"com.acme","doc":"v` + string(rune('a'+i)) + `","fields":[
			{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"note","type":"string"}]}`
		ids[i] = sreg.Register(t, subject("orders"), s)
		data[i] = encode(t, ids[i], s, orderV1T{ID: "o"})
	}
	hc, calls := srtest.CountingClient()
	const probe = 200 * time.Millisecond
	reg := newRegistry(t, sreg, avro.HTTPClient(hc), avro.Timeout(time.Second),
		avro.CircuitBreaker(avro.BreakerConfig{Failures: 3, Probe: backoff.Fixed(probe)}))
	var changes sync.Map
	var nChanges atomic.Int32
	reg.Breaker().OnStateChange(func(from, to avro.State) {
		changes.Store(nChanges.Add(1), from.String()+">"+to.String())
	})
	d := must(avro.NewDeserializer[Order](reg, orderV2))

	sreg.Stop()
	const outage = 2 * time.Second
	cpu0 := cpuTime(t)
	ctx, cancel := context.WithTimeout(context.Background(), outage)
	var wg sync.WaitGroup
	var failures atomic.Int64
	retry := backoff.Fixed(10 * time.Millisecond) // the consumer's own pacing, shorter than the probe interval
	for i := range workers {
		wg.Go(func() {
			for attempt := 1; ctx.Err() == nil; attempt++ {
				_, err := d.Deserialize(ctx, meta, data[i])
				if err == nil {
					t.Error("decoded during the outage")
					return
				}
				if ctx.Err() == nil && !failure.IsTransient(err) {
					t.Errorf("not transient: %v", err)
					return
				}
				failures.Add(1)
				w, _ := backoff.Next(retry, attempt, 0, err)
				_ = backoff.Sleep(ctx, w)
			}
		})
	}
	wg.Wait()
	cancel()
	cpu := cpuTime(t) - cpu0
	n := calls.Load()
	// Before opening: at most one request per worker (all may be in flight
	// when the breaker opens); then one probe per interval.
	bound := int64(workers) + int64(outage/probe) + 3
	t.Logf("outage %v: %d registry requests (bound %d), %d failed decodes, CPU %v, state %v",
		outage, n, bound, failures.Load(), cpu, reg.Breaker().State())
	if n > bound {
		t.Errorf("%d registry requests during the outage, want <= %d", n, bound)
	}
	if cpu > 500*time.Millisecond { // generous: -race, a shared machine
		t.Errorf("CPU %v during a %v outage", cpu, outage)
	}
	if s := reg.Breaker().State(); s == avro.Closed {
		t.Errorf("breaker %v after the outage", s)
	}
	closed := reg.Breaker().Closed()
	select {
	case <-closed:
		t.Fatal("Closed() channel closed while open")
	default:
	}

	// Restart: the next probe closes the breaker and everything decodes.
	sreg.Start(t)
	before := calls.Load()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range workers {
		wg.Go(func() {
			for attempt := 1; ; attempt++ {
				_, err := d.Deserialize(ctx, meta, data[i])
				if err == nil {
					return
				}
				w, _ := backoff.Next(retry, attempt, 0, err)
				if backoff.Sleep(ctx, w) != nil {
					t.Errorf("no recovery: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-closed:
	default:
		t.Fatal("Closed() channel not closed after recovery")
	}
	if s := reg.Breaker().State(); s != avro.Closed {
		t.Fatalf("breaker %v after recovery", s)
	}
	if n := calls.Load() - before; n > workers+1 {
		t.Errorf("%d requests to recover %d ids", n, workers)
	}
	var seq []string
	for i := int32(1); i <= nChanges.Load(); i++ {
		v, _ := changes.Load(i)
		seq = append(seq, v.(string))
	}
	if len(seq) < 3 || seq[0] != "closed>open" || seq[len(seq)-1] != "half-open>closed" {
		t.Errorf("state changes %v", seq)
	}
}

// TestBreakerOpenFailsFast: while open, a lookup makes no request and
// carries the time until the next probe.
func TestBreakerOpenFailsFast(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	id := sreg.Register(t, subject("orders"), orderV1)
	hc, calls := srtest.CountingClient()
	reg := newRegistry(t, sreg, avro.HTTPClient(hc),
		avro.CircuitBreaker(avro.BreakerConfig{Failures: 1, Probe: backoff.Fixed(time.Hour)}))
	d := must(avro.NewDeserializer[Order](reg, orderV2))
	sreg.SetFault(srtest.Fault{Status: 503})
	data := encode(t, id, orderV1, orderV1T{})
	if _, err := d.Deserialize(context.Background(), meta, data); avro.IsBreakerOpen(err) || !failure.IsTransient(err) {
		t.Fatalf("first failure: %v", err)
	}
	if s := reg.Breaker().State(); s != avro.Open {
		t.Fatalf("state %v", s)
	}
	_, err := d.Deserialize(context.Background(), meta, data)
	after, ok := failure.RetryAfterOf(err)
	if !avro.IsBreakerOpen(err) || !failure.IsTransient(err) || !ok || after < 59*time.Minute {
		t.Fatalf("open: %v (retry after %v)", err, after)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests", n)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if reg.Breaker().Wait(wctx) == nil {
		t.Fatal("Wait returned while open")
	}
}
