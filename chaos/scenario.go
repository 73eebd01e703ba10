package main

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/consumer"
)

// Scenario is one generated run: the consumer's mode, the workload and the
// faults. It is a pure function of the seed and the backend, and it is
// written to the run folder as JSON for the child processes to read.
type Scenario struct {
	Seed uint64 `json:"seed"`
	// Try tells the runs of one seed apart while it is shrunk: topics and
	// the group get new names (a deleted topic's name is not free at once
	// on a real cluster). 0 on the first run.
	Try     int    `json:"try,omitempty"`
	Backend string `json:"backend"`
	Mode    Mode   `json:"mode"`

	// Workload.
	Partitions int     `json:"partitions"`  // source partitions at start
	Keys       int     `json:"keys"`        // distinct non-empty keys
	NullKeys   float64 `json:"null_keys"`   // share of records without a key
	EmptyKeys  float64 `json:"empty_keys"`  // share of records with the empty key
	Records    int     `json:"records"`     // records produced
	ProduceMs  int     `json:"produce_ms"`  // produced evenly over this long
	Poison     float64 `json:"poison"`      // share of undecodable values
	Permanent  float64 `json:"permanent"`   // share the handler rejects permanently
	Transient  float64 `json:"transient"`   // share that fails transiently a few times
	Exhaust    float64 `json:"exhaust"`     // share that fails transiently until exhausted
	LatencyMs  int     `json:"latency_ms"`  // handler latency, at most
	Large      float64 `json:"large"`       // share of records near the size limit
	MaxMessage int     `json:"max_message"` // source topic max.message.bytes
	Members    int     `json:"members"`     // consumer processes at start

	Faults []Fault `json:"faults"`
}

// Mode is the consumer's configuration, one row of the table of modes.
type Mode struct {
	Dispatch       string `json:"dispatch"` // one | lanes | batch
	LanesMax       int    `json:"lanes_max,omitempty"`
	LanesUnordered bool   `json:"lanes_unordered,omitempty"`
	BatchSize      int    `json:"batch_size,omitempty"`
	BatchLingerMs  int    `json:"batch_linger_ms,omitempty"`

	Tries          int   `json:"tries"`      // tries in place (backoff.MaxAttempts)
	BackoffMs      int   `json:"backoff_ms"` // fixed wait between tries in place
	TiersMs        []int `json:"tiers_ms,omitempty"`
	TiersUnordered bool  `json:"tiers_unordered,omitempty"`

	ExactlyOnce     bool   `json:"exactly_once,omitempty"`
	DurableAttempts bool   `json:"durable_attempts"`
	Protocol        string `json:"protocol"` // classic | consumer
	BufferRecords   int    `json:"buffer_records,omitempty"`
	CommitMs        int    `json:"commit_ms"`
}

// String is the short name of a mode, for the tables.
func (m Mode) String() string {
	var b strings.Builder
	b.WriteString(m.Dispatch)
	switch m.Dispatch {
	case "lanes":
		fmt.Fprintf(&b, "(%d", m.LanesMax)
		if m.LanesUnordered {
			b.WriteString(",unordered")
		}
		b.WriteString(")")
	case "batch":
		fmt.Fprintf(&b, "(%d)", m.BatchSize)
	}
	if len(m.TiersMs) > 0 {
		fmt.Fprintf(&b, "+tiers%d", len(m.TiersMs))
		if m.TiersUnordered {
			b.WriteString("(unordered)")
		}
	}
	if m.ExactlyOnce {
		b.WriteString("+eos")
	}
	if m.DurableAttempts {
		b.WriteString("+durable")
	}
	b.WriteString("+" + m.Protocol)
	return b.String()
}

// TotalTries is how many handler calls a record that keeps failing
// transiently gets before its policy gives up: its tries in place, then one
// per tier.
func (m Mode) TotalTries() int { return m.Tries + len(m.TiersMs) }

// OrderedKeys reports whether the mode promises per-key order within a
// source partition, and whether records without a key are ordered too.
func (m Mode) OrderedKeys() (keys, nullKeys bool) {
	switch {
	case m.Dispatch == "batch":
		// A failed record of a batch is retried alone after the others
		// were processed: order holds only for records that never fail.
		return false, false
	case m.Dispatch == "lanes" && m.LanesUnordered:
		return false, false
	case len(m.TiersMs) > 0 && m.TiersUnordered:
		return false, false
	case len(m.TiersMs) > 0:
		return true, false // records without a key are not ordered (RetryTopics)
	}
	return true, m.Dispatch == "one"
}

// Fault kinds.
const (
	FaultKill       = "kill"        // SIGKILL a consumer process, restart it after a while
	FaultLeave      = "leave"       // SIGTERM a consumer process (it leaves the group)
	FaultJoin       = "join"        // start one more consumer process
	FaultPause      = "pause"       // Consumer.Pause one owned partition, Resume after a while
	FaultSkip       = "skip"        // Consumer.Skip the record a partition is stuck on
	FaultKillSwitch = "killswitch"  // Consumer.SetRetryEnabled(false), on again after a while
	FaultGrow       = "grow"        // the source topic grows partitions
	FaultDelete     = "delete"      // the dead-letter topic (or a tier topic) is deleted
	FaultBrokerKill = "broker-kill" // SIGKILL a broker leading a source partition, restart it
	FaultBrokerHang = "broker-hang" // SIGSTOP a broker leading a source partition, SIGCONT it
	// Network faults between the consumers and the broker leading a source
	// partition, through its TCP fault proxy (see netProxies).
	FaultNetLatency   = "net-latency"    // 50-500ms each way
	FaultNetCut       = "net-cut"        // bytes dropped, or the proxy disabled
	FaultNetSlowClose = "net-slow-close" // connections cut, then closed late
)

// isNetFault reports whether kind goes through the fault proxies.
func isNetFault(kind string) bool {
	return kind == FaultNetLatency || kind == FaultNetCut || kind == FaultNetSlowClose
}

// hasNetFault reports whether the scenario needs the fault proxies.
func (sc *Scenario) hasNetFault() bool {
	return slices.ContainsFunc(sc.Faults, func(f Fault) bool { return isNetFault(f.Kind) })
}

// Fault is one fault at a moment of the run.
type Fault struct {
	AtMs  int    `json:"at_ms"`
	Kind  string `json:"kind"`
	Arg   int    `json:"arg"`    // member index, partitions to add, source partition whose leader is faulted
	ForMs int    `json:"for_ms"` // how long it lasts (restart delay, pause, hang)
}

// faultKinds lists the kinds drawn on a backend, with their weights.
func faultKinds(backend string) []weighted {
	k := []weighted{
		{FaultKill, 4}, {FaultLeave, 1}, {FaultJoin, 2}, {FaultPause, 2},
		{FaultSkip, 2}, {FaultKillSwitch, 1}, {FaultGrow, 1}, {FaultDelete, 1},
	}
	if backend == "cluster" {
		// First: seeds that are multiples of len(kinds) draw a broker
		// kill first, the next ones a broker hang (see Generate).
		k = append([]weighted{{FaultBrokerKill, 3}, {FaultBrokerHang, 3}}, k...)
		// Last, so that the broker faults keep their places.
		k = append(k, weighted{FaultNetLatency, 2}, weighted{FaultNetCut, 2}, weighted{FaultNetSlowClose, 1})
	}
	return k
}

type weighted struct {
	kind string
	w    int
}

func pickWeighted(r *rand.Rand, ws []weighted) string {
	total := 0
	for _, w := range ws {
		total += w.w
	}
	n := r.IntN(total)
	for _, w := range ws {
		if n < w.w {
			return w.kind
		}
		n -= w.w
	}
	return ws[len(ws)-1].kind
}

// drawMode draws one row of the table of modes. Every axis is drawn on its
// own; New decides what combines (see accepted), so that the table widens by
// itself when New accepts more.
func drawMode(r *rand.Rand) Mode {
	m := Mode{
		Tries:           1 + r.IntN(4),
		BackoffMs:       5 + r.IntN(40),
		DurableAttempts: r.IntN(2) == 0,
		Protocol:        []string{"classic", "consumer"}[r.IntN(2)],
		CommitMs:        []int{100, 500, 2000}[r.IntN(3)],
	}
	if r.IntN(3) == 0 {
		// Slow retries in place: a fault lands mid-retry more often.
		m.BackoffMs = 200 + r.IntN(400)
	}
	switch r.IntN(3) {
	case 0:
		m.Dispatch = "one"
	case 1:
		m.Dispatch = "lanes"
		m.LanesMax = 2 + r.IntN(7)
		m.LanesUnordered = r.IntN(4) == 0
	case 2:
		m.Dispatch = "batch"
		m.BatchSize = 1 + r.IntN(50)
		m.BatchLingerMs = 5 + r.IntN(50)
	}
	if r.IntN(2) == 0 {
		delays := []int{100, 250, 500, 1000}
		r.Shuffle(len(delays), func(i, j int) { delays[i], delays[j] = delays[j], delays[i] })
		m.TiersMs = delays[:1+r.IntN(2)]
		if len(m.TiersMs) == 2 && m.TiersMs[0] > m.TiersMs[1] {
			m.TiersMs[0], m.TiersMs[1] = m.TiersMs[1], m.TiersMs[0]
		}
		m.TiersUnordered = r.IntN(4) == 0
	}
	m.ExactlyOnce = r.IntN(3) == 0
	if r.IntN(3) == 0 {
		m.BufferRecords = 20 + r.IntN(300)
	}
	return m
}

// accepted asks consumer.New whether it takes the mode today. New starts a
// client (it joins the group in the background), so the brokers are a closed
// loopback port and the consumer is closed at once.
func accepted(m Mode) error {
	sc := &Scenario{Mode: m}
	cfg := sc.config([]string{"127.0.0.1:9"}, 0, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := consumer.New(cfg)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// WithoutEOSDelete is the entry of Generate's without that leaves the
// delete fault out of exactly-once scenarios only: for a Kafka below
// transaction.version 2, where a dead-letter topic or retry tier deleted
// under exactly-once consumers halts them (docs/modes.md).
const WithoutEOSDelete = "eos-delete"

// Generate builds the scenario of a seed. Fault kinds in without are not
// drawn (a kind whose defect is known and not fixed yet, say).
func Generate(seed uint64, backend string, without ...string) *Scenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	sc := &Scenario{Seed: seed, Backend: backend}
	for range 50 {
		m := drawMode(r)
		if accepted(m) == nil {
			sc.Mode = m
			break
		}
	}
	if sc.Mode.Dispatch == "" { // cannot happen while "one" alone is accepted
		sc.Mode = Mode{Dispatch: "one", Tries: 2, BackoffMs: 10, Protocol: "classic", CommitMs: 500}
	}
	sc.Partitions = 1 + r.IntN(4)
	sc.Keys = 1 + r.IntN(12)
	sc.NullKeys = []float64{0, 0.05, 0.3}[r.IntN(3)]
	sc.EmptyKeys = []float64{0, 0.05}[r.IntN(2)]
	sc.Records = 100 + r.IntN(500)
	sc.ProduceMs = 1500 + r.IntN(3000)
	sc.Poison = []float64{0, 0.01, 0.05}[r.IntN(3)]
	sc.Permanent = []float64{0, 0.01, 0.04}[r.IntN(3)]
	sc.Transient = []float64{0, 0.03, 0.1}[r.IntN(3)]
	sc.Exhaust = []float64{0, 0.01, 0.03}[r.IntN(3)]
	sc.LatencyMs = []int{0, 2, 10}[r.IntN(3)]
	sc.Large = []float64{0, 0.01}[r.IntN(2)]
	sc.MaxMessage = 256 << 10
	sc.Members = 1 + r.IntN(3)

	if sc.Mode.ExactlyOnce && slices.Contains(without, WithoutEOSDelete) {
		without = append(slices.Clip(without), FaultDelete)
	}
	kinds := slices.DeleteFunc(faultKinds(backend), func(w weighted) bool { return slices.Contains(without, w.kind) })
	n := 1 + r.IntN(5)
	if backend == "cluster" {
		n = 2 + r.IntN(3)
	}
	span := sc.ProduceMs + 2000
	for i := range n {
		f := Fault{AtMs: 300 + r.IntN(span), Kind: pickWeighted(r, kinds)}
		if i == 0 {
			// Consecutive seeds draw every kind at least once: a
			// bounded sample of len(kinds) runs covers them all.
			f.Kind = kinds[seed%uint64(len(kinds))].kind
		}
		switch f.Kind {
		case FaultKill:
			f.Arg, f.ForMs = r.IntN(8), 100+r.IntN(2000)
		case FaultLeave, FaultPause, FaultSkip, FaultKillSwitch:
			f.Arg, f.ForMs = r.IntN(8), 200+r.IntN(2000)
		case FaultGrow:
			f.Arg = 1 + r.IntN(2)
		case FaultDelete:
			f.Arg = r.IntN(2) // 0: the dead-letter topic, 1: the first tier, if any
		case FaultBrokerKill:
			f.Arg, f.ForMs = r.IntN(64), 500+r.IntN(4000)
		case FaultBrokerHang:
			f.Arg, f.ForMs = r.IntN(64), 1000+r.IntN(7000)
		case FaultNetLatency, FaultNetCut, FaultNetSlowClose:
			f.Arg, f.ForMs = r.IntN(64), 1000+r.IntN(6000)
		}
		sc.Faults = append(sc.Faults, f)
	}
	sortFaults(sc.Faults)
	return sc
}

func sortFaults(fs []Fault) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].AtMs < fs[j-1].AtMs; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

// Source is the topic the scenario's consumers read.
func (sc *Scenario) Source() string { return sc.prefix() + "src" }

// prefix starts the names of the scenario's topics and group.
func (sc *Scenario) prefix() string {
	if sc.Try > 0 {
		return fmt.Sprintf("chaos-%d-t%d-", sc.Seed, sc.Try)
	}
	return fmt.Sprintf("chaos-%d-", sc.Seed)
}

// Output is the topic of the handler's outputs in the exactly-once mode.
func (sc *Scenario) Output() string { return sc.prefix() + "out" }

// DLQ is the dead-letter topic of the source (the default template).
func (sc *Scenario) DLQ() string { return sc.Source() + ".dlq" }

// Tiers are the retry tier topics (the default template).
func (sc *Scenario) Tiers() []string {
	var ts []string
	for _, d := range sc.Mode.TiersMs {
		ts = append(ts, consumer.RetryTopics{}.TierTopic(sc.Source(), sc.Group(), ms(d)))
	}
	return ts
}

// Group is the consumer group.
func (sc *Scenario) Group() string { return sc.prefix() + "group" }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }
