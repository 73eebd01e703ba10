package sreg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

const (
	v1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	v2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"currency","type":"string","default":"EUR"}]}`
)

// The registry answers what franz-go's sr client asks, the way a
// Confluent registry does, and keeps its schemas across a restart.
func TestRegistry(t *testing.T) {
	r, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	cl, err := sr.NewClient(sr.URLs(r.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	register := func(subject, schema string) int {
		t.Helper()
		id, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: schema}, -1, -1)
		if err != nil {
			t.Fatalf("register %s: %v", subject, err)
		}
		return id
	}
	id1 := register("orders-value", v1)
	id2 := register("orders-value", v2)
	if id1 == id2 || register("orders-value", v1) != id1 || register("other-value", v1) != id1 {
		t.Errorf("ids: a schema has one id whatever its subject, a new schema a new one (%d, %d)", id1, id2)
	}
	if s, err := cl.SchemaByID(ctx, id2); err != nil || s.Schema != v2 {
		t.Errorf("schema %d: %q, %v", id2, s.Schema, err)
	}
	if ss, err := cl.SchemaByVersion(ctx, "orders-value", 2); err != nil || ss.ID != id2 || ss.Version != 2 {
		t.Errorf("orders-value version 2: %+v, %v", ss, err)
	}
	if ss, err := cl.SchemaByVersion(ctx, "orders-value", -1); err != nil || ss.ID != id2 {
		t.Errorf("orders-value latest: %+v, %v", ss, err)
	}
	var re *sr.ResponseError
	if _, err := cl.SchemaByID(ctx, 0x7fffffff); !errors.As(err, &re) || re.ErrorCode != sr.ErrSchemaNotFound.Code {
		t.Errorf("unknown id: %v, want error code %d", err, sr.ErrSchemaNotFound.Code)
	}

	r.Stop()
	if _, err := cl.SchemaByID(ctx, id1); err == nil || errors.As(err, &re) {
		t.Errorf("stopped: %v, want a connection error", err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if s, err := cl.SchemaByID(ctx, id1); err != nil || s.Schema != v1 {
		t.Errorf("after the restart, schema %d: %q, %v", id1, s.Schema, err)
	}
}
