package otel

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
)

// Carrier is a propagation.TextMapCarrier over a record's headers, as
// franz-go's plugin/kotel has: Get reads the last header of a key, Set
// replaces the headers of a key (or appends one). Producers use it to write
// the trace context into the records they produce:
//
//	otel.GetTextMapPropagator().Inject(ctx, antiotel.Carrier(rec))
func Carrier(r *kgo.Record) propagation.TextMapCarrier { return carrier{r} }

type carrier struct{ r *kgo.Record }

func (c carrier) Get(key string) string {
	for i := len(c.r.Headers) - 1; i >= 0; i-- {
		if c.r.Headers[i].Key == key {
			return string(c.r.Headers[i].Value)
		}
	}
	return ""
}

func (c carrier) Set(key, value string) {
	hs := c.r.Headers[:0]
	for _, h := range c.r.Headers {
		if h.Key != key {
			hs = append(hs, h)
		}
	}
	c.r.Headers = append(hs, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c.r.Headers))
	for _, h := range c.r.Headers {
		keys = append(keys, h.Key)
	}
	return keys
}
