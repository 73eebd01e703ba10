package serde_test

import (
	"bytes"
	"testing"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/serde"
)

// Fuzz targets promise one thing: no input makes a codec or stage panic (a
// recovered panic counts as a failure here too). Each runs its seed corpus as
// a normal test.

var fuzzKeys = serde.StaticKeys{"k": bytes.Repeat([]byte{7}, 32)}

func seeds(f *testing.F, valid ...[]byte) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{0x1f, 0x8b})                                                                   // gzip magic only
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})                                        // gzip header, no body
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})                                                       // zstd magic only
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) // huge frame content size
	f.Add([]byte{0, 0, 0, 0, 1})                                                                // Confluent-style magic + id
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 'x'})                                                  // huge length prefix
	f.Add([]byte(`{"id":"a","amount":1}`))
	f.Add([]byte(`{"id":"a"`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[`))
	f.Add([]byte("\xff\xfe\xfd"))
	for _, v := range valid {
		f.Add(v)
		f.Add(v[:len(v)/2])
		if len(v) > 0 {
			f.Add(v[:len(v)-1])
		}
	}
}

func encode(f *testing.F, s serde.EncodeStage, data []byte) []byte {
	m := serde.Meta{Part: serde.Value}
	out, err := s.Encode(ctx, &m, data)
	if err != nil {
		f.Fatal(err)
	}
	return out
}

func noPanic[T any](t *testing.T, d serde.Deserializer[T], m serde.Meta, data []byte) {
	t.Helper()
	if _, err := d.Deserialize(ctx, m, data); serde.IsPanic(err) {
		t.Fatalf("panic on %q: %v", data, err)
	}
}

func noPanicStage(t *testing.T, s serde.Stage, m serde.Meta, data []byte) {
	t.Helper()
	noPanic(t, serde.Pipe(serde.Bytes(), s), m, data)
}

func FuzzJSON(f *testing.F) {
	seeds(f)
	lax, strict := serde.JSON[order](), serde.JSON[order](serde.Strict())
	anyJSON := serde.JSON[any](serde.Strict())
	f.Fuzz(func(t *testing.T, data []byte) {
		noPanic(t, lax, meta, data)
		noPanic(t, strict, meta, data)
		noPanic(t, anyJSON, meta, data)
	})
}

func FuzzString(f *testing.F) {
	seeds(f)
	d := serde.String(serde.ValidUTF8())
	f.Fuzz(func(t *testing.T, data []byte) {
		noPanic(t, d, meta, data)
		noPanic(t, serde.Bytes(), meta, data)
	})
}

func FuzzGzip(f *testing.F) {
	s := serde.Gzip(serde.MaxSize(1 << 20))
	seeds(f, encode(f, s, []byte(`{"id":"a","amount":1}`)), encode(f, s, nil))
	f.Fuzz(func(t *testing.T, data []byte) { noPanicStage(t, s, meta, data) })
}

func FuzzZstd(f *testing.F) {
	s := serde.Zstd(serde.MaxSize(1 << 20))
	seeds(f, encode(f, s, []byte(`{"id":"a","amount":1}`)), encode(f, s, bytes.Repeat([]byte("ab"), 5000)))
	f.Fuzz(func(t *testing.T, data []byte) { noPanicStage(t, s, meta, data) })
}

func FuzzAESGCM(f *testing.F) {
	s := serde.AESGCM(fuzzKeys, serde.EncryptWith("k"))
	seeds(f, encode(f, s, []byte("hello")))
	m := serde.Meta{Part: serde.Value, Headers: []serde.Header{{Key: serde.DefaultKeyIDHeader, Value: []byte("k")}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		noPanicStage(t, s, m, data)
		noPanicStage(t, s, meta, data) // no key-id header
	})
}

func FuzzChain(f *testing.F) {
	gz := serde.Gzip(serde.MaxSize(1 << 20))
	seeds(f, encode(f, gz, []byte(`{"id":"a","amount":1}`)), encode(f, gz, []byte(`{"id":`)))
	d := serde.Handle(serde.Retry(serde.Pipe(serde.JSON[order](serde.Strict()), gz), backoff.MaxAttempts(fast, 3)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := d.Deserialize(ctx, meta, data)
		if err != nil {
			t.Fatalf("Handle returned an error: %v", err)
		}
		if !r.OK() {
			if serde.IsPanic(r.Failure.Err) {
				t.Fatalf("panic on %q: %v", data, r.Failure.Err)
			}
			if !bytes.Equal(r.Failure.Data, data) || r.Failure.Stage == "" {
				t.Fatalf("bad failure: %+v", r.Failure)
			}
		}
	})
}
