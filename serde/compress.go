package serde

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// DefaultMaxSize is the default output limit of the decompression stages.
const DefaultMaxSize = 64 << 20 // 64 MiB

// A CompressOption configures [Gzip] and [Zstd].
type CompressOption func(*compressConfig)

type compressConfig struct {
	maxSize int64
	level   int
	hasLvl  bool
}

// MaxSize bounds the decompressed size. Output beyond n bytes is a permanent
// [ErrTooLarge]: a small record that decompresses to gigabytes (a zip bomb)
// costs at most n bytes of memory. Optional; default [DefaultMaxSize]. An n
// below 1 counts as the default.
func MaxSize(n int64) CompressOption {
	return func(c *compressConfig) { c.maxSize = n }
}

// Level sets the compression level of the encoder: a gzip level (1 to 9,
// -1 default, -2 Huffman only) or a zstd level (see
// zstd.EncoderLevelFromZstd: 1 fastest to 22 best). Optional; default the
// library's default. An invalid level makes Encode fail.
func Level(l int) CompressOption {
	return func(c *compressConfig) { c.level, c.hasLvl = l, true }
}

func newCompressConfig(opts []CompressOption) compressConfig {
	var c compressConfig
	for _, o := range opts {
		o(&c)
	}
	if c.maxSize < 1 {
		c.maxSize = DefaultMaxSize
	}
	return c
}

// Gzip returns a stage that decompresses gzip (RFC 1952, multi-member
// streams included) and compresses with gzip. Decode returns a new slice.
// Corrupt, truncated and oversized input is a permanent error.
func Gzip(opts ...CompressOption) StageCodec {
	g := &gzipStage{cfg: newCompressConfig(opts)}
	if !g.cfg.hasLvl {
		g.cfg.level = gzip.DefaultCompression
	}
	return g
}

type gzipStage struct {
	cfg     compressConfig
	readers sync.Pool // *gzip.Reader
	writers sync.Pool // *gzip.Writer
}

func (*gzipStage) Name() string { return "gzip" }

func (g *gzipStage) Decode(_ context.Context, m Meta, data []byte) ([]byte, error) {
	br := bytes.NewReader(data)
	zr, _ := g.readers.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(br)
	} else {
		err = zr.Reset(br)
	}
	if err != nil {
		if err == io.EOF { // no data at all
			err = io.ErrUnexpectedEOF
		}
		return nil, permanent("gzip", m.Part, err)
	}
	out, err := readLimited(zr, g.cfg.maxSize, len(data))
	g.readers.Put(zr)
	if err != nil {
		return nil, permanent("gzip", m.Part, err)
	}
	return out, nil
}

func (g *gzipStage) Encode(_ context.Context, m *Meta, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(data)/2 + 64)
	zw, _ := g.writers.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(&buf, g.cfg.level); err != nil {
			return nil, permanent("gzip", m.Part, err)
		}
	} else {
		zw.Reset(&buf)
	}
	if _, err := zw.Write(data); err != nil {
		return nil, permanent("gzip", m.Part, err)
	}
	if err := zw.Close(); err != nil {
		return nil, permanent("gzip", m.Part, err)
	}
	zw.Reset(io.Discard) // do not keep buf alive in the pool
	g.writers.Put(zw)
	return buf.Bytes(), nil
}

// readLimited reads r to the end, failing with ErrTooLarge past limit bytes.
func readLimited(r io.Reader, limit int64, hint int) ([]byte, error) {
	size := min(int64(hint)*4+512, limit+1)
	buf := bytes.NewBuffer(make([]byte, 0, size))
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)
	}
	return buf.Bytes(), nil
}

// Zstd returns a stage that decompresses zstd frames and compresses with
// zstd. Decode returns a new slice. Corrupt, truncated and oversized input
// is a permanent error. The stage holds a shared decoder (and, once Encode
// is used, a shared encoder) for its lifetime.
func Zstd(opts ...CompressOption) StageCodec {
	z := &zstdStage{cfg: newCompressConfig(opts)}
	z.dec = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(uint64(z.cfg.maxSize)),
		)
	})
	z.enc = sync.OnceValues(func() (*zstd.Encoder, error) {
		o := []zstd.EOption{zstd.WithEncoderConcurrency(1)}
		if z.cfg.hasLvl {
			o = append(o, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(z.cfg.level)))
		}
		return zstd.NewWriter(nil, o...)
	})
	return z
}

type zstdStage struct {
	cfg compressConfig
	dec func() (*zstd.Decoder, error)
	enc func() (*zstd.Encoder, error)
}

func (*zstdStage) Name() string { return "zstd" }

func (z *zstdStage) Decode(_ context.Context, m Meta, data []byte) ([]byte, error) {
	d, err := z.dec()
	if err != nil {
		return nil, permanent("zstd", m.Part, err)
	}
	if len(data) == 0 {
		return nil, permanent("zstd", m.Part, io.ErrUnexpectedEOF)
	}
	out, err := d.DecodeAll(data, nil)
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			err = fmt.Errorf("%w (%d bytes): %w", ErrTooLarge, z.cfg.maxSize, err)
		}
		return nil, permanent("zstd", m.Part, err)
	}
	if int64(len(out)) > z.cfg.maxSize {
		return nil, permanent("zstd", m.Part, fmt.Errorf("%w (%d bytes)", ErrTooLarge, z.cfg.maxSize))
	}
	return out, nil
}

func (z *zstdStage) Encode(_ context.Context, m *Meta, data []byte) ([]byte, error) {
	e, err := z.enc()
	if err != nil {
		return nil, permanent("zstd", m.Part, err)
	}
	return e.EncodeAll(data, nil), nil
}
