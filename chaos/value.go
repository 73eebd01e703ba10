package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/pills"
	"github.com/antidote-kafka/antidote/serde"
)

// Value is what a good record says about itself: how the handler treats it.
// The producer writes it into the record's value, so that the children and
// the oracle need nothing but the record to know what should happen to it.
type Value struct {
	ID    int  // the producer's sequence number
	Fail  int  // the handler fails transiently while Record.Attempt <= Fail
	Perm  bool // the handler rejects it (failure.Permanent)
	LatMs int  // the handler takes this long
}

const valuePrefix = "chaos "

// Encode writes v, padded to size bytes.
func (v Value) Encode(size int) []byte {
	perm := 0
	if v.Perm {
		perm = 1
	}
	s := fmt.Sprintf("%sid=%d fail=%d perm=%d lat=%d |", valuePrefix, v.ID, v.Fail, perm, v.LatMs)
	if size > len(s) {
		s += strings.Repeat("x", size-len(s))
	}
	return []byte(s)
}

var errNotChaos = errors.New("not a chaos value")

// ParseValue reads a value written by Encode; anything else is a poison pill.
func ParseValue(b []byte) (Value, error) {
	var v Value
	s, ok := strings.CutPrefix(string(b), valuePrefix)
	if !ok {
		return v, errNotChaos
	}
	s, _, ok = strings.Cut(s, " |")
	if !ok {
		return v, errNotChaos
	}
	for _, f := range strings.Fields(s) {
		k, val, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(val)
		if err != nil {
			return v, fmt.Errorf("field %q: %w", k, err)
		}
		switch k {
		case "id":
			v.ID = n
		case "fail":
			v.Fail = n
		case "perm":
			v.Perm = n == 1
		case "lat":
			v.LatMs = n
		default:
			return v, fmt.Errorf("unknown field %q", k)
		}
	}
	return v, nil
}

// poison returns a poison pill, drawn from the kinds `antidote poison`
// produces (internal/pills), and its kind: pill i of the kind (a "huge" one
// near the topic's size limit, maxMessage); or, one draw in 13, a null value
// (a tombstone), which the command cannot write and a consumer meets all
// the same.
func poison(r *rand.Rand, i, maxMessage int) (value []byte, kind string) {
	kinds := pills.Kinds()
	n := r.IntN(len(kinds) + 1)
	if n == len(kinds) {
		return nil, "null"
	}
	k := kinds[n]
	size := 0
	if k.Name == "huge" {
		size = maxMessage - 4096 - r.IntN(8192)
	}
	return k.Value(i, size), k.Name
}

// valueDeserializer decodes chaos values; a poison pill is a permanent
// failure (half of them unclassified, which the default policy treats the
// same at the deserialize stage).
type valueDeserializer struct{}

func (valueDeserializer) Deserialize(_ context.Context, _ serde.Meta, b []byte) (Value, error) {
	v, err := ParseValue(b)
	if err != nil {
		if len(b)%2 == 0 {
			return v, failure.Permanent(err)
		}
		return v, err
	}
	return v, nil
}
