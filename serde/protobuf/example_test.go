package protobuf_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/protobuf/internal/testpb"
	"github.com/antidote-kafka/antidote/serde/registry"
)

const (
	moneyProto = `syntax = "proto3";
package acme;
message Money { string currency = 1; int64 units = 2; }`
	orderProto = `syntax = "proto3";
package acme;
import "acme/money.proto";
import "google/protobuf/timestamp.proto";
message Order {
  message Item { string sku = 1; int32 qty = 2; }
  string id = 1;
  Money total = 2;
  repeated Item items = 3;
  google.protobuf.Timestamp at = 4;
}
message Refund { string order_id = 1; Money amount = 2; }`
)

func Example() {
	// An in-process registry for the example; in production: the
	// registry's URL. A producer registered acme/order.proto, which
	// imports acme/money.proto: a schema with a reference.
	fake := srfake.New()
	defer fake.Close()
	cl, _ := sr.NewClient(sr.URLs(fake.URL()))
	ctx := context.Background()
	_, _ = cl.RegisterSchema(ctx, "acme/money.proto", sr.Schema{Schema: moneyProto, Type: sr.TypeProtobuf}, -1, -1)
	id, _ := cl.RegisterSchema(ctx, "orders-value", sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "acme/money.proto", Subject: "acme/money.proto", Version: 1}}}, -1, -1)

	// What the producer wrote: the header (schema id, message index 0:
	// acme.Order), then the Protobuf binary.
	b, _ := proto.Marshal(&testpb.Order{Id: "o-1", Total: &testpb.Money{Currency: "EUR", Units: 42}})
	data := append(protobuf.AppendWire(nil, id, 0), b...)

	reg, _ := registry.New(fake.URL(), registry.Logger(slog.New(slog.DiscardHandler)))
	d, _ := protobuf.NewDeserializer[*testpb.Order](reg)
	m := serde.Meta{Topic: "orders", Part: serde.Value}
	o, err := d.Deserialize(ctx, m, data)
	fmt.Println(o.GetId(), o.GetTotal().GetUnits(), o.GetTotal().GetCurrency(), err)

	// A Refund (message index 1) on the same topic is another type.
	b, _ = proto.Marshal(&testpb.Refund{OrderId: "o-1"})
	_, err = d.Deserialize(ctx, m, append(protobuf.AppendWire(nil, id, 1), b...))
	fmt.Println(protobuf.IsUnknownType(err), failure.Classify(err))
	// Output:
	// o-1 42 EUR <nil>
	// true permanent
}
