package serde_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

func TestBytesCopies(t *testing.T) {
	in := []byte("abc")
	out, _ := serde.Bytes().Deserialize(ctx, meta, in)
	in[0] = 'X'
	if string(out) != "abc" {
		t.Fatal("Bytes aliases its input")
	}
}

func TestString(t *testing.T) {
	bad := []byte{0xff, 'a'}
	if v, err := serde.String().Deserialize(ctx, meta, bad); err != nil || v != string(bad) {
		t.Fatal(v, err)
	}
	_, err := serde.String(serde.ValidUTF8()).Deserialize(ctx, meta, bad)
	if !errors.Is(err, serde.ErrInvalidUTF8) || !failure.IsPermanent(err) {
		t.Fatal(err)
	}
	m := meta
	if _, err := serde.String(serde.ValidUTF8()).Serialize(ctx, &m, string(bad)); !errors.Is(err, serde.ErrInvalidUTF8) {
		t.Fatal(err)
	}
}

type order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

func TestJSON(t *testing.T) {
	lax, strict := serde.JSON[order](), serde.JSON[order](serde.Strict())
	for _, tt := range []struct {
		in              string
		laxOK, strictOK bool
	}{
		{`{"id":"a","amount":1}`, true, true},
		{` {"id":"a"} ` + "\n", true, true},
		{`{"id":"a","extra":1}`, true, false},
		{`{"id":"a"} {"id":"b"}`, false, false},
		{`{"id":"a"} x`, false, false},
		{`{"id":1}`, false, false},
		{``, false, false},
		{`{`, false, false},
	} {
		_, err := lax.Deserialize(ctx, meta, []byte(tt.in))
		if (err == nil) != tt.laxOK || (err != nil && !failure.IsPermanent(err)) {
			t.Errorf("lax %q: %v", tt.in, err)
		}
		_, err = strict.Deserialize(ctx, meta, []byte(tt.in))
		if (err == nil) != tt.strictOK || (err != nil && !failure.IsPermanent(err)) {
			t.Errorf("strict %q: %v", tt.in, err)
		}
	}
	_, err := strict.Deserialize(ctx, meta, []byte(`{"id":"a"} {}`))
	if !errors.Is(err, serde.ErrTrailingData) {
		t.Error(err)
	}
}

func TestRoundTrips(t *testing.T) {
	keys := serde.StaticKeys{"k1": bytes.Repeat([]byte{1}, 32), "k2": bytes.Repeat([]byte{2}, 16)}
	big := strings.Repeat(`{"id":"abc","amount":12.5}`, 100)
	for _, stages := range [][]serde.StageCodec{
		nil,
		{serde.Gzip()},
		{serde.Zstd()},
		{serde.AESGCM(keys, serde.EncryptWith("k1"))},
		{serde.AESGCM(keys, serde.EncryptWith("k2"), serde.KeyIDHeader("kid")), serde.Zstd(serde.Level(3))},
		{serde.AESGCM(keys, serde.EncryptWith("k1")), serde.Gzip(serde.Level(9))},
	} {
		c := serde.PipeCodec(serde.String(), stages...)
		for range 2 { // twice: pooled readers and cached ciphers
			m := serde.Meta{Topic: "t", Part: serde.Value}
			data, err := c.Serialize(ctx, &m, big)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Deserialize(ctx, m, data)
			if err != nil || got != big {
				t.Fatalf("%d stages: %v", len(stages), err)
			}
		}
	}
	// JSON and Bytes.
	m := meta
	b, _ := serde.JSON[order]().Serialize(ctx, &m, order{ID: "x", Amount: 2})
	if o, err := serde.JSON[order]().Deserialize(ctx, m, b); err != nil || o.ID != "x" {
		t.Fatal(o, err)
	}
	if b, _ := serde.Bytes().Serialize(ctx, &m, []byte("z")); string(b) != "z" {
		t.Fatal(string(b))
	}
}

func TestDecompressionLimits(t *testing.T) {
	bomb := bytes.Repeat([]byte{0}, 1<<20)
	for _, s := range []serde.StageCodec{serde.Gzip(serde.MaxSize(64 << 10)), serde.Zstd(serde.MaxSize(64 << 10))} {
		m := meta
		data, err := s.Encode(ctx, &m, bomb)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Decode(ctx, m, data)
		if !errors.Is(err, serde.ErrTooLarge) || !failure.IsPermanent(err) {
			t.Errorf("%s: %v", s.Name(), err)
		}
		// Exactly at the limit is fine.
		data, _ = s.Encode(ctx, &m, bomb[:64<<10])
		if out, err := s.Decode(ctx, m, data); err != nil || len(out) != 64<<10 {
			t.Errorf("%s at limit: %v", s.Name(), err)
		}
		for _, junk := range [][]byte{nil, {0x1f}, []byte("garbage garbage"), data[:len(data)/2]} {
			if _, err := s.Decode(ctx, m, junk); err == nil || !failure.IsPermanent(err) {
				t.Errorf("%s %q: %v", s.Name(), junk, err)
			}
		}
	}
}

type failingKeys struct{ err error }

func (f failingKeys) Key(context.Context, string) ([]byte, error) { return nil, f.err }

func TestAESGCMErrors(t *testing.T) {
	keys := serde.StaticKeys{"k1": bytes.Repeat([]byte{1}, 32), "short": []byte("x")}
	enc := serde.AESGCM(keys, serde.EncryptWith("k1"))
	m := serde.Meta{Part: serde.Value}
	data, _ := enc.Encode(ctx, &m, []byte("secret"))
	if v, ok := m.Header(serde.DefaultKeyIDHeader); !ok || string(v) != "k1" {
		t.Fatal("key-id header not set")
	}
	hdr := func(id string) serde.Meta {
		return serde.Meta{Part: serde.Value, Headers: []serde.Header{{Key: serde.DefaultKeyIDHeader, Value: []byte(id)}}}
	}
	tampered := bytes.Clone(data)
	tampered[len(tampered)-1] ^= 1
	for _, tt := range []struct {
		name  string
		s     serde.Stage
		m     serde.Meta
		data  []byte
		want  error
		class failure.Class
	}{
		{"missing header", enc, serde.Meta{}, data, serde.ErrMissingKeyID, failure.ClassPermanent},
		{"unknown key", enc, hdr("nope"), data, serde.ErrUnknownKey, failure.ClassPermanent},
		{"bad key size", enc, hdr("short"), data, nil, failure.ClassPermanent},
		{"too short", enc, hdr("k1"), data[:10], serde.ErrCiphertext, failure.ClassPermanent},
		{"tampered", enc, hdr("k1"), tampered, serde.ErrCiphertext, failure.ClassPermanent},
		{"key service down", serde.AESGCM(failingKeys{errors.New("kms: 500")}), hdr("k1"), data, nil, failure.ClassTransient},
		{"key service marked", serde.AESGCM(failingKeys{failure.Permanent(errors.New("revoked"))}), hdr("k1"), data, nil, failure.ClassPermanent},
	} {
		_, err := tt.s.Decode(ctx, tt.m, tt.data)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || failure.Classify(err) != tt.class {
			t.Errorf("%s: %v (%v)", tt.name, err, failure.Classify(err))
		}
		if s, _ := serde.StageOf(err); s != "aes-gcm" {
			t.Errorf("%s: stage %q", tt.name, s)
		}
	}
	if _, err := serde.AESGCM(keys).Encode(ctx, &m, []byte("x")); err == nil {
		t.Error("Encode without EncryptWith succeeded")
	}
}
