package protobuf_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/protobuf/internal/testpb"
)

// TestJSONDeserializer: without generated types, a record decodes into the
// JSON of its writer message (references resolved through the registry),
// the same JSON that protojson makes from the generated type; a name
// limits the messages accepted; poison stays a permanent error.
func TestJSONDeserializer(t *testing.T) {
	sreg := srtest.New(t)
	id := registerOrder(t, sreg, false)
	reg := newRegistry(t, sreg)
	anyMsg := must(protobuf.NewJSONDeserializer(reg, ""))
	only := must(protobuf.NewJSONDeserializer(reg, "acme.Order"))
	want := must(protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(order()))
	for _, d := range []*protobuf.JSONDeserializer{anyMsg, only} {
		got, err := d.Deserialize(context.Background(), meta, frame(t, id, order()))
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !jsonEqual(g, w) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	}
	refund := frame(t, id, &testpb.Refund{OrderId: "o-9"}, 1)
	if got, err := anyMsg.Deserialize(context.Background(), meta, refund); err != nil || string(must(json.Marshal(must(jsonOf(got))))) != `{"amount":null,"order_id":"o-9"}` {
		t.Errorf("any message: %s, %v", got, err)
	}
	if _, err := only.Deserialize(context.Background(), meta, refund); !protobuf.IsUnknownType(err) || !failure.IsPermanent(err) {
		t.Errorf("acme.Order only, a Refund: %v", err)
	}
	if _, err := anyMsg.Deserialize(context.Background(), meta, []byte("hello")); !errors.Is(err, protobuf.ErrNotFramed) || !failure.IsPermanent(err) {
		t.Errorf("not framed: %v", err)
	}
	if _, err := protobuf.NewJSONDeserializer(reg, "not a name!"); err == nil {
		t.Error("an invalid message name was accepted")
	}
}

func jsonOf(b []byte) (any, error) {
	var v any
	return v, json.Unmarshal(b, &v)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestJSONDeserializerAny: a google.protobuf.Any holding a message of the
// record's own schema is written with that message's fields, though no Go
// type of it is linked in.
func TestJSONDeserializerAny(t *testing.T) {
	sreg := srtest.New(t)
	id := sreg.RegisterSchema(t, kafkatest.UniqueName("box")+"-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package box;
import "google/protobuf/any.proto";
message Box { google.protobuf.Any item = 1; }
message Thing { string name = 1; }
`})
	thing := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x")
	anyMsg := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "type.googleapis.com/box.Thing")
	anyMsg = protowire.AppendBytes(protowire.AppendTag(anyMsg, 2, protowire.BytesType), thing)
	box := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), anyMsg)
	d := must(protobuf.NewJSONDeserializer(newRegistry(t, sreg), "box.Box"))
	got, err := d.Deserialize(context.Background(), meta, append(protobuf.AppendWire(nil, id), box...))
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := json.Marshal(must(jsonOf(got)))
	if want := `{"item":{"@type":"type.googleapis.com/box.Thing","name":"x"}}`; string(norm) != want {
		t.Errorf("got %s, want %s", norm, want)
	}
}
