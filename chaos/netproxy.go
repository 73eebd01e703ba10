package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// netProxies are TCP fault proxies (Shopify's toxiproxy, run in this process)
// between the consumer children and the brokers: one per broker, listening
// on an ephemeral loopback port. A child's client dials a broker's proxy
// instead of the broker (see routeDialer): every connection of the child to
// that broker, the seed connection included, goes through it, whatever
// address the broker advertises, with no change to the brokers. The
// harness's own clients (producer, oracle reader, admin) dial the brokers
// directly, so a network fault is between the consumers and one broker only.
//
// A proxy passes bytes through untouched until a net-* fault puts toxics on
// it for a while: latency, a cut (data dropped, or the proxy disabled: its
// connections closed and new ones refused), or a slow close.
type netProxies struct {
	server *toxiproxy.ApiServer
	mu     sync.Mutex // one fault at a time on the proxies
	byAddr map[string]*toxiproxy.Proxy
	// dirty: the broker's proxy had a timeout toxic and was not replaced
	// yet (see renew); no toxic may be added to it.
	dirty map[string]bool
	log   *countingLog
}

// countingLog keeps toxiproxy's log (a JSON line per event) in a file and
// counts the connections the proxies accepted.
type countingLog struct {
	w        io.Writer
	accepted atomic.Int64
}

func (l *countingLog) Write(b []byte) (int, error) {
	l.accepted.Add(int64(bytes.Count(b, []byte(`"message":"Accepted client"`))))
	return l.w.Write(b)
}

// newNetProxies starts a proxy for each broker address; logPath receives the
// proxies' log (io.Discard when empty).
func newNetProxies(brokers []string, logPath string) (*netProxies, error) {
	var w io.Writer = io.Discard
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		w = f
	}
	l := &countingLog{w: w}
	logger := zerolog.New(l).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	n := &netProxies{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger),
		byAddr: map[string]*toxiproxy.Proxy{}, dirty: map[string]bool{}, log: l}
	for i, b := range brokers {
		p := toxiproxy.NewProxy(n.server, fmt.Sprintf("broker%d", i), "127.0.0.1:0", b)
		if err := p.Start(); err != nil {
			n.close()
			return nil, fmt.Errorf("proxy for %s: %w", b, err)
		}
		n.byAddr[b] = p
	}
	return n, nil
}

// routes is the children's -proxy flag: broker=proxy pairs.
func (n *netProxies) routes() string {
	var rs []string
	for b, p := range n.byAddr {
		rs = append(rs, b+"="+p.Listen)
	}
	sort.Strings(rs)
	return strings.Join(rs, ",")
}

// accepted is how many connections the proxies accepted so far.
func (n *netProxies) accepted() int64 { return n.log.accepted.Load() }

func (n *netProxies) close() {
	for _, p := range n.byAddr {
		p.Stop()
	}
}

// parseRoutes reads the -proxy flag.
func parseRoutes(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if b, p, ok := strings.Cut(kv, "="); ok {
			m[b] = p
		}
	}
	return m
}

// routeDialer is the children's kgo.Dialer: a broker with a proxy is dialed
// through it. The consumer passes a dialer on to the clients it starts of
// its own (tiers, durable attempts, large letters), so they are routed too.
func routeDialer(routes map[string]string) kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if p, ok := routes[host]; ok {
			host = p
		}
		return d.DialContext(ctx, network, host)
	})
}

// fault runs network fault kind on the proxy of broker for d, then heals
// it. A cut is a black hole (arg even: the timeout toxic drops every byte
// and keeps the connections open; removing it closes them) or the proxy
// disabled (arg odd: connections closed at once, new ones refused). A slow
// close cuts the connections after d/3 and delays their close by d/3 more
// (the timeout toxic, then slow_close behind it).
func (n *netProxies) fault(ctx context.Context, kind, broker string, arg int, d time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byAddr[broker] == nil {
		return fmt.Errorf("no proxy for broker %s", broker)
	}
	if n.dirty[broker] {
		if err := n.renew(broker); err != nil {
			return err
		}
	}
	p := n.byAddr[broker]
	var names []string
	add := func(typ string, attrs string) error {
		for _, stream := range []string{"upstream", "downstream"} {
			name := typ + "_" + stream
			js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name, typ, stream, attrs)
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				return fmt.Errorf("toxic %s: %w", name, err)
			}
			names = append(names, name)
		}
		return nil
	}
	heal := func() {
		for _, name := range names {
			p.Toxics.RemoveToxic(context.Background(), name)
		}
	}
	ms := d.Milliseconds()
	var err error
	switch kind {
	case FaultNetLatency:
		lat := 50 + int64(arg%10)*50 // 50-500ms each way
		err = add("latency", fmt.Sprintf(`"latency":%d,"jitter":%d`, lat, lat/4))
	case FaultNetCut:
		if arg%2 == 1 {
			p.Stop()
			sleep(ctx, d)
			return p.Start() // on its address again
		}
		err = add("timeout", `"timeout":0`)
	case FaultNetSlowClose:
		if err = add("timeout", fmt.Sprintf(`"timeout":%d`, max(ms/3, 1))); err == nil {
			err = add("slow_close", fmt.Sprintf(`"delay":%d`, max(ms/3, 1)))
		}
	default:
		err = fmt.Errorf("unknown network fault %q", kind)
	}
	if err != nil {
		heal()
		return err
	}
	sleep(ctx, d)
	heal()
	if kind != FaultNetLatency {
		// The timeout toxic closes its connections when it is removed,
		// and toxiproxy (v2.12.0, ToxicLink.RemoveToxic) then leaves
		// that link's stubs out of step with the chain until the link is
		// gone, which it is only later: a toxic added to the proxy before
		// that panics (index out of range in ToxicLink.AddToxic) and ends
		// this process. So the proxy is replaced by a fresh one on the
		// same address, which has no such links (its connections were cut
		// anyway), now or, failing that, before its next toxic.
		n.dirty[broker] = true
		return n.renew(broker)
	}
	return nil
}

// renew replaces the dirty proxy of broker with a fresh one on the same
// address. n.mu is held.
func (n *netProxies) renew(broker string) error {
	old := n.byAddr[broker]
	old.Stop()
	var err error
	for range 50 { // the address is free once Stop returns; a busy machine may lag
		p := toxiproxy.NewProxy(n.server, old.Name, old.Listen, old.Upstream)
		if err = p.Start(); err == nil {
			n.byAddr[broker] = p
			delete(n.dirty, broker)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("proxy for %s on %s again: %w", broker, old.Listen, err)
}
