package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Order is the value type of the benchmark topics: a JSON object of about
// -value-size bytes.
type Order struct {
	ID        int64     `json:"id"`
	Customer  string    `json:"customer"`
	SKU       string    `json:"sku"`
	Quantity  int       `json:"quantity"`
	Price     float64   `json:"price"`
	Currency  string    `json:"currency"`
	CreatedAt time.Time `json:"created_at"`
	Note      string    `json:"note"`
}

var (
	currencies = []string{"EUR", "USD", "GBP", "CHF", "JPY"}
	baseTime   = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	padding    = strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 64)
)

// poisonCount is the number of poison pills for ratio among n records.
func poisonCount(n int, ratio float64) int {
	k := int(math.Round(ratio * float64(n)))
	return min(max(k, 0), n)
}

// dataset generates the records of one topic deterministically from seed.
type dataset struct {
	rng       *rand.Rand
	valueSize int
	poison    []bool // by record index
	pills     int
}

func newDataset(seed, stream uint64, n, valueSize int, ratio float64) *dataset {
	d := &dataset{rng: rand.New(rand.NewPCG(seed, stream)), valueSize: valueSize, poison: make([]bool, n)}
	d.pills = poisonCount(n, ratio)
	// A partial Fisher-Yates shuffle picks exactly d.pills distinct indices.
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	for i := 0; i < d.pills; i++ {
		j := i + d.rng.IntN(n-i)
		idx[i], idx[j] = idx[j], idx[i]
		d.poison[idx[i]] = true
	}
	return d
}

// order returns the JSON encoding of order i, padded to about valueSize bytes.
func (d *dataset) order(i int) []byte {
	o := Order{
		ID:        int64(i),
		Customer:  fmt.Sprintf("customer-%05d", d.rng.IntN(100000)),
		SKU:       fmt.Sprintf("SKU-%06d", d.rng.IntN(1000000)),
		Quantity:  1 + d.rng.IntN(10),
		Price:     float64(d.rng.IntN(100000)) / 100,
		Currency:  currencies[d.rng.IntN(len(currencies))],
		CreatedAt: baseTime.Add(time.Duration(i) * time.Second),
	}
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // cannot happen: Order always encodes
	}
	if pad := d.valueSize - len(b); pad > 0 {
		o.Note = padding[:min(pad, len(padding))]
		b, _ = json.Marshal(o)
	}
	return b
}

// record returns the key and value of record i: a valid order, or, for a
// poison pill, garbage bytes or truncated JSON.
func (d *dataset) record(i int) (key, value []byte) {
	key = []byte("order-" + strconv.Itoa(i))
	v := d.order(i)
	if !d.poison[i] {
		return key, v
	}
	if d.rng.IntN(2) == 0 {
		// Garbage: random bytes behind a byte no JSON text starts with.
		g := make([]byte, len(v))
		for j := range g {
			g[j] = byte(d.rng.UintN(256))
		}
		g[0] = 0xff
		return key, g
	}
	// Truncated JSON: a proper prefix of the object, never closed.
	return key, v[:1+d.rng.IntN(len(v)-1)]
}
