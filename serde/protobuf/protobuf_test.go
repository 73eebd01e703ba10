package protobuf_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/protobuf/internal/testpb"
	"github.com/antidote-kafka/antidote/serde/registry"
)

var meta = serde.Meta{Topic: "orders", Part: serde.Value}

// quietLogger drops the logs of the code under test unless
// ANTIDOTE_TEST_LOGS=1 (srtest.Logger).
func quietLogger() *slog.Logger { return srtest.Logger() }

func newRegistry(t testing.TB, sreg *srtest.Registry, opts ...registry.Opt) *registry.Registry {
	t.Helper()
	r, err := registry.New(sreg.URL(), append([]registry.Opt{registry.Logger(quietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// protoText returns a test .proto file.
func protoText(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("internal", "testpb", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// registerOrder registers acme/order.proto and its reference
// acme/money.proto, as .proto text (Confluent's Java and Go serializers)
// or as base64 FileDescriptorProtos (Python's), under subjects unique to
// this run, and returns the id of order.proto.
func registerOrder(t testing.TB, sreg *srtest.Registry, base64Form bool) int {
	t.Helper()
	money, order := protoText(t, "acme/money.proto"), protoText(t, "acme/order.proto")
	if base64Form {
		enc := func(b []byte, err error) string {
			if err != nil {
				t.Fatal(err)
			}
			return base64.StdEncoding.EncodeToString(b)
		}
		// As Python's runtime serializes them: without JSON names.
		strip := func(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
			fdp := protodesc.ToFileDescriptorProto(fd)
			var clear func([]*descriptorpb.DescriptorProto)
			clear = func(ms []*descriptorpb.DescriptorProto) {
				for _, m := range ms {
					for _, f := range m.Field {
						f.JsonName = nil
					}
					clear(m.NestedType)
				}
			}
			clear(fdp.MessageType)
			return fdp
		}
		money = enc(proto.Marshal(strip(testpb.File_acme_money_proto)))
		order = enc(proto.Marshal(strip(testpb.File_acme_order_proto)))
	}
	moneySubject := kafkatest.UniqueName("acme-money")
	sreg.RegisterSchema(t, moneySubject, sr.Schema{Schema: money, Type: sr.TypeProtobuf})
	return sreg.RegisterSchema(t, kafkatest.UniqueName("orders")+"-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "acme/money.proto", Subject: moneySubject, Version: 1}}})
}

func frame(t testing.TB, id int, m proto.Message, indexes ...int) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(protobuf.AppendWire(nil, id, indexes...), b...)
}

func order() *testpb.Order {
	return &testpb.Order{Id: "o-1", Total: &testpb.Money{Currency: "EUR", Units: 42},
		Items: []*testpb.Order_Item{{Sku: "a", Qty: 2}}, At: timestamppb.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
}

func TestDecode(t *testing.T) {
	for _, form := range []struct {
		name   string
		base64 bool
	}{{".proto text", false}, {"base64 FileDescriptorProto", true}} {
		t.Run(form.name, func(t *testing.T) {
			sreg := srtest.New(t)
			id := registerOrder(t, sreg, form.base64)
			d := must(protobuf.NewDeserializer[*testpb.Order](newRegistry(t, sreg)))
			want := order()
			got, err := d.Deserialize(context.Background(), meta, frame(t, id, want))
			if err != nil || !proto.Equal(got, want) {
				t.Fatalf("got %v, %v; want %v", got, err, want)
			}
			// The long form of [0] decodes too.
			got, err = d.Deserialize(context.Background(), meta, append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 2, 0}, must(proto.Marshal(want))...))
			if err != nil || !proto.Equal(got, want) {
				t.Fatalf("indexes [0] in full: %v, %v", got, err)
			}
		})
	}
}

// TestPermanentErrors: each kind of poison is a permanent, classified
// error of stage protobuf.
func TestPermanentErrors(t *testing.T) {
	sreg := srtest.New(t)
	id := registerOrder(t, sreg, false)
	noRefs := sreg.RegisterSchema(t, kafkatest.UniqueName("norefs")+"-value", sr.Schema{Type: sr.TypeProtobuf,
		Schema: protoText(t, "acme/order.proto")})
	avroID := sreg.Register(t, kafkatest.UniqueName("avro")+"-value", `{"type":"record","name":"A","fields":[{"name":"a","type":"long"}]}`)
	d := must(protobuf.NewDeserializer[*testpb.Order](newRegistry(t, sreg)))
	refund := frame(t, id, &testpb.Refund{OrderId: "o"}, 1)
	hdr := protobuf.AppendWire(nil, id)

	for _, c := range []struct {
		name  string
		data  []byte
		check func(error) bool
	}{
		{"a string from a console producer", []byte("hello"), func(err error) bool { return errors.Is(err, protobuf.ErrNotFramed) }},
		{"no message indexes", hdr[:5], func(err error) bool { return errors.Is(err, protobuf.ErrNotFramed) }},
		{"a negative index count", append(hdr[:5:5], 0x01), func(err error) bool { return errors.Is(err, protobuf.ErrNotFramed) }},
		{"a huge index count", append(hdr[:5:5], 0xfe, 0xff, 0xff, 0xff, 0x0f), func(err error) bool { return errors.Is(err, protobuf.ErrNotFramed) }},
		{"indexes cut short", append(hdr[:5:5], 0x04, 0x02), func(err error) bool { return errors.Is(err, protobuf.ErrNotFramed) }},
		{"unknown schema id", frame(t, 987654, order()), func(err error) bool {
			e, ok := errors.AsType[*protobuf.UnknownSchemaError](err)
			return ok && e.ID == 987654
		}},
		{"another message of the file", refund, func(err error) bool {
			e, ok := errors.AsType[*protobuf.UnknownTypeError](err)
			return ok && e.Name == "acme.Refund" && protobuf.IsUnknownType(err)
		}},
		{"a nested message", frame(t, id, &testpb.Order_Item{Sku: "a"}, 0, 0), func(err error) bool {
			e, ok := errors.AsType[*protobuf.UnknownTypeError](err)
			return ok && e.Name == "acme.Order.Item"
		}},
		{"indexes that name no message", frame(t, id, order(), 7), func(err error) bool {
			e, ok := errors.AsType[*protobuf.UnknownTypeError](err)
			return ok && e.Name == "" && len(e.Indexes) == 1
		}},
		{"corrupt Protobuf", append(append([]byte{}, hdr...), 0x0a, 0xff, 0x01, 'x'), func(err error) bool {
			e, ok := errors.AsType[*protobuf.DecodeError](err)
			return ok && e.Name == "acme.Order"
		}},
		{"a schema whose import is not a reference", frame(t, noRefs, order()), func(err error) bool {
			e, ok := errors.AsType[*protobuf.SchemaError](err)
			return ok && strings.Contains(e.Reason, "acme/money.proto")
		}},
		{"an Avro schema id", frame(t, avroID, order()), func(err error) bool {
			e, ok := errors.AsType[*protobuf.SchemaError](err)
			return ok && strings.Contains(e.Reason, "AVRO")
		}},
	} {
		_, err := d.Deserialize(context.Background(), meta, c.data)
		stage, _ := serde.StageOf(err)
		if err == nil || !failure.IsPermanent(err) || stage != "protobuf" || !c.check(err) {
			t.Errorf("%s: %v (stage %q, class %v)", c.name, err, stage, failure.Classify(err))
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestRegistryDown: a registry failure while fetching the schema or one of
// its references is transient and not remembered: the record decodes once
// the registry is back.
func TestRegistryDown(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	id := registerOrder(t, sreg, false)
	reg := newRegistry(t, sreg, registry.CircuitBreaker(registry.BreakerConfig{Disabled: true}))
	d := must(protobuf.NewDeserializer[*testpb.Order](reg))
	data := frame(t, id, order())
	sreg.SetFault(srtest.Fault{Status: 503})
	if _, err := d.Deserialize(context.Background(), meta, data); !failure.IsTransient(err) {
		t.Fatalf("registry down: %v", err)
	}
	// The schema is cached, its reference not yet: fail only that.
	sreg.SetFault(srtest.Fault{})
	if _, err := reg.Schema(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	sreg.SetFault(srtest.Fault{Status: 500})
	_, err := d.Deserialize(context.Background(), meta, data)
	if e, ok := errors.AsType[*registry.RegistryError](err); !ok || e.Version != 1 || !failure.IsTransient(err) {
		t.Fatalf("reference lookup down: %v", err)
	}
	sreg.SetFault(srtest.Fault{})
	if got, err := d.Deserialize(context.Background(), meta, data); err != nil || got.GetId() != "o-1" {
		t.Fatalf("after recovery: %v, %v", got, err)
	}
}

func TestWire(t *testing.T) {
	for _, idx := range [][]int{nil, {0}, {1}, {0, 0}, {3, 1, 4}} {
		b := append(protobuf.AppendWire(nil, 7, idx...), 'p')
		id, got, payload, err := protobuf.ParseWire(b)
		want := idx
		if len(want) == 0 {
			want = []int{0}
		}
		if err != nil || id != 7 || string(payload) != "p" || len(got) != len(want) {
			t.Fatalf("%v: %v %v %q %v", idx, id, got, payload, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v: indexes %v", idx, got)
			}
		}
	}
	if b := protobuf.AppendWire(nil, 1); len(b) != 6 || b[5] != 0 {
		t.Fatalf("[0] is not the single 0 byte: %x", b)
	}
}
