package cloudevents_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/cloudevents"
)

func Example() {
	// Decrypt, then read the CloudEvent, then decode its JSON data.
	keys := serde.StaticKeys{"k1": make([]byte, 32)}
	d := serde.Pipe(cloudevents.NewDeserializer(serde.JSON[Order]()), serde.AESGCM(keys))

	// A binary-mode event, as a producer writes it: attributes in ce_*
	// headers, the encrypted data in the value.
	m := &serde.Meta{Topic: "orders", Part: serde.Value, Headers: []serde.Header{
		{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("e-1")},
		{Key: "ce_source", Value: []byte("/shop")}, {Key: "ce_type", Value: []byte("com.acme.order.created")},
		{Key: "content-type", Value: []byte("application/json")},
	}}
	value, _ := serde.AESGCM(keys, serde.EncryptWith("k1")).Encode(context.Background(), m, []byte(`{"id":"o-1","amount":42}`))

	ev, err := d.Deserialize(context.Background(), *m, value)
	fmt.Println(ev.Mode, ev.Type, ev.Source, ev.Data.ID, ev.Data.Amount, err)

	// Without its source, it is not a CloudEvent: permanent.
	m.Headers = slices.DeleteFunc(m.Headers, func(h serde.Header) bool { return h.Key == "ce_source" })
	_, err = d.Deserialize(context.Background(), *m, value)
	var missing *cloudevents.MissingAttributeError
	fmt.Println(errors.As(err, &missing), missing.Name, failure.Classify(err))
	// Output:
	// binary com.acme.order.created /shop o-1 42 <nil>
	// true source permanent
}
