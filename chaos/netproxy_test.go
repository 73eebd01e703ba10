package main

import (
	"context"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// proxied is a one-broker kfake cluster, its fault proxy, and a client
// of it routed through the proxy, with opts; all closed with the test.
func proxied(t *testing.T, opts ...kgo.Opt) (broker string, np *netProxies, cl *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker = c.ListenAddrs()[0]
	if np, err = newNetProxies(c.ListenAddrs(), ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(np.close)
	if cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(broker), routeDialer(parseRoutes(np.routes()))}, opts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return broker, np, cl
}

// A child's client reaches the broker through its fault proxy, and each
// network fault does to that client what it says: latency slows its
// requests, a cut (either kind) and a slow close stop them, and the client
// works again once the fault heals.
func TestNetProxyFaults(t *testing.T) {
	broker, np, cl := proxied(t, kgo.RetryTimeout(200*time.Millisecond), kgo.RequestRetries(0))
	// The proxy of the broker: a fault that cuts connections replaces it
	// when it heals (netProxies.renew).
	proxy := func() *toxiproxy.Proxy { return np.byAddr[broker] }

	// request times one ApiVersions round trip to the broker, within limit.
	request := func(limit time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		_, err := cl.Broker(0).Request(ctx, kmsg.NewPtrApiVersionsRequest())
		return time.Since(start), err
	}
	if _, err := request(5 * time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if n := np.accepted(); n < 1 {
		t.Fatalf("the proxy accepted %d connections: the client went around it", n)
	}
	// during starts fault kind and waits until it is in place.
	during := func(kind string, arg int, d time.Duration) chan error {
		done := make(chan error, 1)
		go func() { done <- np.fault(context.Background(), kind, broker, arg, d) }()
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			p := proxy()
			p.Lock()
			on := p.Enabled
			p.Unlock()
			if len(p.Toxics.GetToxicArray()) > 0 || !on {
				return done
			}
		}
		t.Fatalf("%s: not in place after 2s", kind)
		return nil
	}
	healed := func(kind string, done chan error) {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var err error
		for range 20 { // a cut connection is dialed again
			if _, err = request(time.Second); err == nil {
				return
			}
		}
		t.Fatalf("after %s: %v", kind, err)
	}

	done := during(FaultNetLatency, 3, 1500*time.Millisecond) // 200ms each way, jitter 50ms
	if took, err := request(5 * time.Second); err != nil || took < 250*time.Millisecond {
		t.Errorf("%s: a request took %v (%v), want 300ms or more", FaultNetLatency, took, err)
	}
	healed(FaultNetLatency, done)
	if took, err := request(5 * time.Second); err != nil || took >= 400*time.Millisecond {
		t.Errorf("after %s: a request took %v (%v), want less than the 400ms round trip it added", FaultNetLatency, took, err)
	}

	for _, f := range []struct {
		kind string
		arg  int
	}{{FaultNetCut, 0}, {FaultNetCut, 1}, {FaultNetSlowClose, 0}} {
		before := np.accepted()
		done := during(f.kind, f.arg, time.Second)
		if _, err := request(300 * time.Millisecond); err == nil {
			t.Errorf("%s (arg %d): a request went through", f.kind, f.arg)
		}
		healed(f.kind, done)
		if np.accepted() == before {
			t.Errorf("%s (arg %d): the client did not connect again through the proxy", f.kind, f.arg)
		}
	}
}

// TestNetProxyToxicAfterCut: a toxic added as soon as a slow close heals,
// while a connection it cut is still closing, works. In toxiproxy such a
// link is out of step with its chain until it is gone, and adding a toxic
// to it panicked and ended the harness (seen in a cluster run: a slow
// close, then latency); the proxy is now replaced when a cut heals.
func TestNetProxyToxicAfterCut(t *testing.T) {
	broker, np, cl := proxied(t, kgo.RequestRetries(0))
	for range 3 {
		// A slow close of 1.5s cuts a connection after 0.5s; one dialed
		// 1.2s in is still open, inside its 0.5s, when the fault heals.
		done := make(chan error, 1)
		go func() { done <- np.fault(context.Background(), FaultNetSlowClose, broker, 0, 1500*time.Millisecond) }()
		time.Sleep(1200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		go func() {
			defer cancel()
			_, _ = cl.Broker(0).Request(ctx, kmsg.NewPtrApiVersionsRequest())
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := np.fault(context.Background(), FaultNetLatency, broker, 0, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		<-ctx.Done()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if _, last = cl.Broker(0).Request(ctx, kmsg.NewPtrApiVersionsRequest()); last == nil {
			return
		}
	}
	t.Fatalf("no request through the proxy after the faults: %v", last)
}
