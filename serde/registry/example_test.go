package registry_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde/registry"
)

func Example() {
	fake := srfake.New()
	reg, _ := registry.New(fake.URL(), registry.Logger(slog.New(slog.DiscardHandler)),
		registry.CircuitBreaker(registry.BreakerConfig{Failures: 1}))
	ctx := context.Background()

	id, _ := reg.Register(ctx, "orders-value", sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object"}`})
	s, err := reg.Schema(ctx, id) // fetched once, then from memory
	fmt.Println(s.Type, s.Schema, err)

	// The registry goes away: an uncached id fails transiently, the breaker
	// opens, and the error says when the next probe is due.
	fake.Close()
	_, err = reg.Schema(ctx, id+1)
	_, hinted := failure.RetryAfterOf(err)
	fmt.Println(failure.Classify(err), hinted, reg.Breaker().State())
	// A cached schema still answers.
	_, err = reg.Schema(ctx, id)
	fmt.Println(err)
	// Output:
	// JSON {"type":"object"} <nil>
	// transient true open
	// <nil>
}
