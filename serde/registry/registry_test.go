package registry_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// TestReference: a referenced schema is fetched once by subject and
// version; a missing one is permanent and names the subject and version.
func TestReference(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t) // counts requests
	sub := "ref-" + t.Name()
	sreg.RegisterSchema(t, sub, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"string"}`})
	reg, err := registry.New(sreg.URL(), registry.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := sreg.Requests()
	for range 3 {
		s, err := reg.Reference(ctx, sr.SchemaReference{Name: "s.json", Subject: sub, Version: 1})
		if err != nil || s.Schema != `{"type":"string"}` {
			t.Fatalf("%+v, %v", s, err)
		}
	}
	if n := sreg.Requests() - before; n != 1 {
		t.Errorf("%d requests for one reference, want 1", n)
	}
	for _, ref := range []sr.SchemaReference{{Subject: "no-such-subject", Version: 1}, {Subject: sub, Version: 9}} {
		_, err = reg.Reference(ctx, ref)
		e, ok := errors.AsType[*registry.UnknownSchemaError](err)
		if !ok || e.Subject != ref.Subject || e.Version != ref.Version || !failure.IsPermanent(err) || !errors.Is(err, registry.ErrUnknownSchema) {
			t.Errorf("%+v: %v", ref, err)
		}
	}
	if s := reg.Breaker().State(); s != registry.Closed {
		t.Errorf("breaker %v after answers", s)
	}
}
