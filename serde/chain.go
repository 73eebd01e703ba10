package serde

import "context"

// link is implemented by the built-in decorators whose success path is one
// call to an inner deserializer. [Handle] uses it to call the innermost
// deserializer directly on the success path, and to run the decorators'
// error handling, innermost first, only after a failure. This keeps the
// cost of a chain to one indirect call and one copy of T, whatever its
// depth.
type link[T any] interface {
	// next returns the inner deserializer, or false if the success path
	// is not a single call to it.
	next() (Deserializer[T], bool)
	// onError does what the decorator does when next failed with err.
	onError(ctx context.Context, m Meta, data []byte, err error) (T, error)
	// innerName names the inner deserializer in a PanicError.
	innerName() string
}

// flatten returns the deserializer at the bottom of d's chain of links and
// the links, outermost first.
func flatten[T any](d Deserializer[T]) (Deserializer[T], []link[T]) {
	var links []link[T]
	for {
		l, ok := d.(link[T])
		if !ok {
			return d, links
		}
		next, ok := l.next()
		if !ok {
			return d, links
		}
		links = append(links, l)
		d = next
	}
}

func (p *pipe[T]) next() (Deserializer[T], bool) { return p.codec, len(p.stages) == 0 }
func (p *pipe[T]) innerName() string             { return p.codecName }
func (p *pipe[T]) onError(_ context.Context, m Meta, _ []byte, err error) (T, error) {
	var zero T
	return zero, wrap(p.codecName, m.Part, err)
}

func (r *retry[T]) next() (Deserializer[T], bool) { return r.d, true }
func (r *retry[T]) innerName() string             { return r.name }
func (r *retry[T]) onError(ctx context.Context, m Meta, data []byte, err error) (T, error) {
	return r.again(ctx, m, data, err)
}
