package jsonschema_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
	"github.com/antidote-kafka/antidote/serde/registry"
)

func Example() {
	// An in-process registry for the example; in production: the
	// registry's URL.
	fake := srfake.New()
	defer fake.Close()
	reg, _ := registry.New(fake.URL(), registry.Logger(slog.New(slog.DiscardHandler)))

	ser, _ := jsonschema.NewSerializer[Order](reg, orderSchema, nil)
	m := serde.Meta{Topic: "orders", Part: serde.Value}
	data, _ := ser.Serialize(context.Background(), &m, Order{ID: "o-1", Amount: 42})

	d, _ := jsonschema.NewDeserializer[Order](reg)
	o, err := d.Deserialize(context.Background(), m, data)
	fmt.Printf("%+v %v\n", o, err)

	// A record that breaks the schema: permanent, naming the failing path.
	id, _, _ := jsonschema.ParseWire(data)
	_, err = d.Deserialize(context.Background(), m, append(jsonschema.AppendWire(nil, id), `{"id":"o-2","amount":-5}`...))
	var ve *jsonschema.ValidationError
	fmt.Println(errors.As(err, &ve), ve.Path, failure.Classify(err))
	// Output:
	// {ID:o-1 Amount:42 Items:[]} <nil>
	// true /amount permanent
}
