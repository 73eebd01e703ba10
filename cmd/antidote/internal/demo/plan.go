package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// demoKind is what the demo writes for one record.
type demoKind uint8

const (
	kindGood demoKind = iota
	kindFlaky
	kindRejected
	kindGarbage
	kindTruncated
	kindWrongShape
	kindEmpty
	// Avro only.
	kindNoMagic
	kindUnknownSchema
	kindUnknownType
	kindTruncatedAvro
	// --retry-topics only: the events of an order after its flaky payment.
	kindAfterFlaky
	numDemoKinds
)

// demoFormat is the encoding of the demo's values: --format.
type demoFormat uint8

const (
	formatJSON demoFormat = iota
	formatAvro
	numDemoFormats
)

var demoFormatNames = [numDemoFormats]string{formatJSON: "json", formatAvro: "avro"}

func (f demoFormat) String() string { return demoFormatNames[f] }

// shares are a kind's shares of the stream, by format.
type shares [numDemoFormats]float64

// demoKindInfo describes a kind: its share of the stream in each format
// (0: not in that format), and the label of the summary table and of the
// JSON summary.
var demoKindInfo = [numDemoKinds]struct {
	name  string
	label string
	share shares
}{
	kindGood:          {"good", "good orders", shares{0, 0}},
	kindFlaky:         {"flaky", "flaky payment call (503, then ok)", shares{0.0025, 0.0025}},
	kindRejected:      {"rejected", "negative amount (handler rejects)", shares{0.0075, 0.0075}},
	kindGarbage:       {"garbage", "garbage bytes (console producer, binary)", shares{0.01, 0.005}},
	kindTruncated:     {"truncated-json", "truncated JSON", shares{0.0075, 0}},
	kindWrongShape:    {"wrong-shape-json", "JSON of the wrong shape", shares{0.0075, 0}},
	kindEmpty:         {"empty", "empty value", shares{0.005, 0.0025}},
	kindNoMagic:       {"no-magic", "Avro without the magic byte and schema id", shares{0, 0.005}},
	kindUnknownSchema: {"unknown-schema", "unknown schema id (not in the registry)", shares{0, 0.0075}},
	kindUnknownType:   {"unknown-type", "refunds (a type this service has no Go type for)", shares{0, 0.0075}},
	kindTruncatedAvro: {"truncated-avro", "truncated Avro", shares{0, 0.0075}},
	kindAfterFlaky:    {"after-flaky", "later events of those orders", shares{0, 0}},
}

// skippedKind reports whether the consumer skips the records of kind
// (consumer.Config.SkipIf): they leave no trace but its Skipped counter.
func skippedKind(k demoKind) bool { return k == kindUnknownType }

func (k demoKind) String() string { return demoKindInfo[k].name }

// demoPlan is the deterministic content of the demo's stream: the kind of
// each record, and how often each flaky record fails.
type demoPlan struct {
	seed   uint64
	format demoFormat
	kinds  []demoKind
	flaky  map[int]int // order id -> failures before success
	// events, with --retry-topics, is the order event of each record
	// (see newRetryPlan); nil otherwise.
	events []planEvent
}

func newDemoPlan(n int, seed uint64, f demoFormat) *demoPlan {
	r := rand.New(rand.NewPCG(seed, 0xa0761d6478bd642f))
	p := &demoPlan{seed: seed, format: f, kinds: make([]demoKind, n), flaky: map[int]int{}}
	for i := range p.kinds {
		x := r.Float64()
		p.kinds[i] = kindGood
		for k := kindFlaky; k < numDemoKinds; k++ {
			share := demoKindInfo[k].share[f]
			if x < share {
				p.kinds[i] = k
				break
			}
			x -= share
		}
		if p.kinds[i] == kindFlaky {
			p.flaky[i] = 1 + r.IntN(2)
		}
	}
	return p
}

// poisonShare is the share of records that are not good orders.
func (p *demoPlan) poisonShare() float64 {
	var s float64
	for k := kindFlaky; k < numDemoKinds; k++ {
		s += demoKindInfo[k].share[p.format]
	}
	return s
}

// flakyFailures is how many times the payment call of order id fails
// before it succeeds.
func (p *demoPlan) flakyFailures(id int) int { return p.flaky[id] }

func (p *demoPlan) rng(i int) *rand.Rand {
	return rand.New(rand.NewPCG(p.seed, uint64(i)))
}

func (p *demoPlan) order(i int) Order {
	r := p.rng(i)
	q := 1 + r.IntN(5)
	return Order{
		ID:          i,
		Customer:    fmt.Sprintf("customer-%04d", r.IntN(5000)),
		SKU:         fmt.Sprintf("sku-%03d", r.IntN(400)),
		Quantity:    q,
		AmountCents: int64(q) * int64(199+r.IntN(20000)),
	}
}

// key is the record key: the customer, so that a customer's orders stay in
// order. Garbage and empty values come without a key, the way a console
// producer writes them.
func (p *demoPlan) key(i int) []byte {
	switch p.kinds[i] {
	case kindGarbage, kindEmpty:
		return nil
	}
	if p.events != nil {
		return orderKey(p.events[i].order)
	}
	return []byte(p.order(i).Customer)
}

var consoleLines = []string{
	"hello", "test", "test 123", "order 42 shipped", "asdf", "{id: 42}", "DELETE FROM orders",
}

func (p *demoPlan) value(i int) []byte {
	if p.events != nil {
		return p.eventValue(i)
	}
	o := p.order(i)
	switch p.kinds[i] {
	case kindRejected:
		o.AmountCents = -o.AmountCents
	case kindGarbage:
		return p.garbage(i)
	case kindTruncated:
		b, _ := json.Marshal(o)
		return b[:len(b)*2/3]
	case kindWrongShape:
		switch i % 3 {
		case 0:
			return fmt.Appendf(nil, `{"id":"%d-abc","customer":%q,"amount_cents":%d}`, i, o.Customer, o.AmountCents)
		case 1:
			return fmt.Appendf(nil, `[{"id":%d},{"id":%d}]`, i, i+1)
		default:
			return fmt.Appendf(nil, `{"id":%d,"customer":%q,"amount_cents":"%d.%02d"}`, i, o.Customer, o.AmountCents/100, o.AmountCents%100)
		}
	case kindEmpty:
		return []byte{}
	}
	b, _ := json.Marshal(o)
	return b
}

// garbage is what a console producer writes: a line of text, or binary.
func (p *demoPlan) garbage(i int) []byte {
	r := p.rng(i)
	if r.IntN(2) == 0 {
		return []byte(consoleLines[r.IntN(len(consoleLines))])
	}
	b := make([]byte, 8+r.IntN(56))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	b[0] = 0xfe
	return b
}
