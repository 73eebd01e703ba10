package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// A try that ends while the worker stops is cut short (not counted as an
// attempt) only when it failed with a context error, serde.Retry's error for
// retries its context ended included; any other failure counts.
func TestCutShort(t *testing.T) {
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	own := failure.Transient(errors.New("dependency down"))
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"running, context error", context.Background(), context.Canceled, false},
		{"stopped, context error", stopped, fmt.Errorf("calling: %w", context.Canceled), true},
		{"stopped, deadline", stopped, context.DeadlineExceeded, true},
		{"stopped, serde.Retry cut by the stop", stopped, &serde.RetryError{Attempts: 2, Reason: serde.StopCanceled, Err: own}, true},
		{"stopped, serde.Retry gave up", stopped, &serde.RetryError{Attempts: 3, Reason: serde.StopMaxAttempts, Err: own}, false},
		{"stopped, its own failure", stopped, own, false},
	} {
		p := &partition[string, string]{ctx: c.ctx}
		if got := p.cutShort(c.err); got != c.want {
			t.Errorf("%s: cutShort = %v, want %v", c.name, got, c.want)
		}
	}
}
