package avro_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
)

func Example() {
	// An in-process registry for the example; in production: the
	// registry's URL.
	fake := srfake.New()
	defer fake.Close()
	reg, _ := avro.NewRegistry(fake.URL(), avro.Logger(slog.New(slog.DiscardHandler)))

	type OrderV1 struct {
		ID     string `avro:"id"`
		Amount int64  `avro:"amount"`
		Note   string `avro:"note"`
	}
	// A producer writes v1; this service reads v2, which adds a currency.
	ser, _ := avro.NewSerializer[OrderV1](reg, orderV1, nil)
	m := serde.Meta{Topic: "orders", Part: serde.Value}
	data, _ := ser.Serialize(context.Background(), &m, OrderV1{ID: "o-1", Amount: 42})

	d, _ := avro.NewDeserializer[Order](reg, orderV2)
	o, err := d.Deserialize(context.Background(), m, data)
	fmt.Printf("%+v %v\n", o, err)

	// A string from a console producer is not Avro: permanent.
	_, err = d.Deserialize(context.Background(), m, []byte("hello"))
	stage, _ := serde.StageOf(err)
	fmt.Println(errors.Is(err, avro.ErrNotAvro), failure.Classify(err), stage)
	// Output:
	// {ID:o-1 Amount:42 Note: Currency:EUR} <nil>
	// true permanent avro
}
