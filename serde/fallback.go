package serde

import "context"

// FallbackFunc chooses a substitute value for bytes that d could not
// deserialize. It receives the same ctx, m and data as the failed call, and
// d's error. It follows the [Deserializer] contract (data is valid only
// during the call). Returning an error (err itself, or another) propagates
// it.
type FallbackFunc[T any] func(ctx context.Context, m Meta, data []byte, err error) (T, error)

// Fallback returns a deserializer that calls fn when d fails, and returns
// what fn returns: the deserialize stage's "fallback" outcome (Spring's
// FailedDeserializationFunction). A panic in d or in fn is recovered and
// returned as a permanent [*PanicError]: a panic in d is passed to fn like
// any error; a panic in fn is returned, with stage "fallback".
func Fallback[T any](d Deserializer[T], fn func(ctx context.Context, m Meta, data []byte, err error) (T, error)) Deserializer[T] {
	return &fallback[T]{d: d, fn: fn, name: nameOf(d, "deserializer")}
}

type fallback[T any] struct {
	d    Deserializer[T]
	fn   FallbackFunc[T]
	name string
}

func (f *fallback[T]) Name() string { return f.name }

func (f *fallback[T]) Deserialize(ctx context.Context, m Meta, data []byte) (T, error) {
	v, err := f.try(ctx, m, data)
	if err == nil {
		return v, nil
	}
	return f.call(ctx, m, data, err)
}

// try calls d once, turning a panic into an error for fn to see.
func (f *fallback[T]) try(ctx context.Context, m Meta, data []byte) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, newPanicError(f.name, m.Part, r)
		}
	}()
	return f.d.Deserialize(ctx, m, data)
}

func (f *fallback[T]) call(ctx context.Context, m Meta, data []byte, cause error) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, newPanicError("fallback", m.Part, r)
		}
	}()
	return f.fn(ctx, m, data, cause)
}
