package serde

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/antidote-kafka/antidote/failure"
)

// DefaultKeyIDHeader is the default name of the header that carries the
// encryption key id.
const DefaultKeyIDHeader = "antidote.key-id"

// A KeySource returns the key for a key id: a key-management service, a
// vault, a static map.
//
// Key is safe for concurrent use and honours ctx. It returns an error
// wrapping [ErrUnknownKey] when it does not know id (a permanent failure of
// the record) and any other error when the lookup itself failed (transient,
// unless the KeySource marked it with package failure). The returned key is
// 16, 24 or 32 bytes (AES-128, -192, -256); it is only read, and may be
// shared.
type KeySource interface {
	Key(ctx context.Context, id string) ([]byte, error)
}

// StaticKeys is a [KeySource] backed by a map from key id to key.
type StaticKeys map[string][]byte

// Key returns k[id], or an error wrapping [ErrUnknownKey].
func (k StaticKeys) Key(_ context.Context, id string) ([]byte, error) {
	if key, ok := k[id]; ok {
		return key, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKey, id)
}

// An AESGCMOption configures [AESGCM].
type AESGCMOption func(*aesGCMStage)

// KeyIDHeader sets the name of the header that carries the key id.
// Optional; default [DefaultKeyIDHeader].
func KeyIDHeader(name string) AESGCMOption {
	return func(s *aesGCMStage) { s.header = name }
}

// EncryptWith sets the key id that Encode uses. Required for Encode; Decode
// does not need it (it reads the id from the record).
func EncryptWith(id string) AESGCMOption {
	return func(s *aesGCMStage) { s.encID = id }
}

// AESGCM returns a stage that decrypts with AES-GCM, choosing the key by the
// record's key-id header, and encrypts with the [EncryptWith] key, adding
// the key-id header. The data is the 12-byte nonce followed by the
// ciphertext and the 16-byte tag. Decode returns a new slice.
//
// Failures of Decode:
//   - no key-id header: [ErrMissingKeyID], permanent;
//   - the key source does not know the id: [ErrUnknownKey], permanent;
//   - the key source failed: transient, unless it marked its error;
//   - a key of the wrong size: permanent (aes.KeySizeError);
//   - data too short, or authentication failed (wrong key, tampered bytes):
//     [ErrCiphertext], permanent.
//
// The stage caches one cipher per key id and rebuilds it when the key source
// returns different key bytes, so key rotation needs no restart.
func AESGCM(keys KeySource, opts ...AESGCMOption) StageCodec {
	s := &aesGCMStage{keys: keys, header: DefaultKeyIDHeader}
	for _, o := range opts {
		o(s)
	}
	return s
}

type aesGCMStage struct {
	keys   KeySource
	header string
	encID  string
	cache  sync.Map // key id -> *aeadEntry
}

type aeadEntry struct {
	key  []byte
	aead cipher.AEAD
}

func (*aesGCMStage) Name() string { return "aes-gcm" }

const gcmNonceSize = 12

// aead returns the cipher for id.
func (s *aesGCMStage) aead(ctx context.Context, part Part, id string) (cipher.AEAD, error) {
	key, err := s.keys.Key(ctx, id)
	if err != nil {
		if _, marked := failure.MarkOf(err); marked {
			return nil, &Error{Stage: "aes-gcm", Part: part, Err: err}
		}
		if errors.Is(err, ErrUnknownKey) {
			return nil, permanent("aes-gcm", part, err)
		}
		return nil, &Error{Stage: "aes-gcm", Part: part, Err: failure.Transient(err)}
	}
	if e, ok := s.cache.Load(id); ok && bytes.Equal(e.(*aeadEntry).key, key) {
		return e.(*aeadEntry).aead, nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, permanent("aes-gcm", part, fmt.Errorf("key %q: %w", id, err))
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, permanent("aes-gcm", part, err)
	}
	s.cache.Store(id, &aeadEntry{key: bytes.Clone(key), aead: aead})
	return aead, nil
}

func (s *aesGCMStage) Decode(ctx context.Context, m Meta, data []byte) ([]byte, error) {
	id, ok := m.Header(s.header)
	if !ok {
		return nil, permanent("aes-gcm", m.Part, fmt.Errorf("%w %q", ErrMissingKeyID, s.header))
	}
	aead, err := s.aead(ctx, m.Part, string(id))
	if err != nil {
		return nil, err
	}
	if len(data) < gcmNonceSize+aead.Overhead() {
		return nil, permanent("aes-gcm", m.Part, fmt.Errorf("%w: %d bytes is too short", ErrCiphertext, len(data)))
	}
	out, err := aead.Open(nil, data[:gcmNonceSize], data[gcmNonceSize:], nil)
	if err != nil {
		return nil, permanent("aes-gcm", m.Part, fmt.Errorf("%w: %w", ErrCiphertext, err))
	}
	return out, nil
}

func (s *aesGCMStage) Encode(ctx context.Context, m *Meta, data []byte) ([]byte, error) {
	if s.encID == "" {
		return nil, permanent("aes-gcm", m.Part, errors.New("no key id to encrypt with (use EncryptWith)"))
	}
	aead, err := s.aead(ctx, m.Part, s.encID)
	if err != nil {
		return nil, err
	}
	out := make([]byte, gcmNonceSize, gcmNonceSize+len(data)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, &Error{Stage: "aes-gcm", Part: m.Part, Err: failure.Transient(err)}
	}
	out = aead.Seal(out, out[:gcmNonceSize], data, nil)
	m.Headers = append(m.Headers, Header{Key: s.header, Value: []byte(s.encID)})
	return out, nil
}
