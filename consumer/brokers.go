package consumer

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
)

// brokerWatch tells whether the cluster answers, from franz-go's connection
// hooks, so that an unreachable cluster is a warning within seconds rather
// than silence.
type brokerWatch struct {
	mu      sync.Mutex
	open    int       // connections open now
	ok      bool      // a connection succeeded and none failed since
	lastErr error     // the last dial error
	downAt  time.Time // when connections started failing; zero while reachable
}

var (
	_ kgo.HookBrokerConnect    = (*brokerWatch)(nil)
	_ kgo.HookBrokerDisconnect = (*brokerWatch)(nil)
)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (b *brokerWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.lastErr, b.ok = err, false
		if b.downAt.IsZero() {
			b.downAt = time.Now()
		}
		return
	}
	b.open++
	b.ok, b.downAt = true, time.Time{}
}

// OnBrokerDisconnect implements kgo.HookBrokerDisconnect.
func (b *brokerWatch) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) {
	b.mu.Lock()
	b.open--
	b.mu.Unlock()
}

func (b *brokerWatch) state() BrokerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BrokerState{Reachable: b.open > 0 || b.ok}
	if !s.Reachable {
		s.Since = b.downAt
		if b.lastErr != nil {
			s.LastError = b.lastErr.Error()
		}
	}
	return s
}

// unreachableAfter is how long the brokers may fail to answer before the
// consumer warns; the warning repeats every unreachableRepeat while they do.
const (
	unreachableAfter  = 3 * time.Second
	unreachableRepeat = 30 * time.Second
)

// watch logs a warning when no broker has answered for unreachableAfter,
// and again every unreachableRepeat while none does, until ctx ends.
func (b *brokerWatch) watch(ctx context.Context, log *slog.Logger, seeds any) {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := b.state()
		if s.Reachable {
			if !warned.IsZero() {
				log.Info("brokers answer again", "seed_brokers", seeds)
				warned = time.Time{}
			}
			continue
		}
		since := s.Since
		if since.IsZero() {
			since = start // no dial has finished yet: a black-hole address
		}
		if time.Since(since) < unreachableAfter || (!warned.IsZero() && time.Since(warned) < unreachableRepeat) {
			continue
		}
		warned = time.Now()
		err := s.LastError
		if err == "" {
			err = "no connection has succeeded (dials are still pending)"
		}
		log.Warn("no broker answers", "seed_brokers", seeds, "for", dur(time.Since(since).Round(time.Second)), "err", err)
	}
}

// clientLogger passes franz-go's log lines to slog up to a level.
type clientLogger struct {
	*kslog.Logger
	max kgo.LogLevel
}

// Level is for the kgo.Logger interface.
func (l clientLogger) Level() kgo.LogLevel { return min(l.Logger.Level(), l.max) }
