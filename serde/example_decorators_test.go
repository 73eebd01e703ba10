package serde_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

type Order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

func ExamplePipe() {
	codec := serde.PipeCodec(serde.JSON[Order](), serde.Gzip())

	m := serde.Meta{Topic: "orders", Part: serde.Value}
	data, _ := codec.Serialize(context.Background(), &m, Order{ID: "o-1", Amount: 9.5})
	o, err := codec.Deserialize(context.Background(), m, data) // gunzip, then JSON
	fmt.Println(o, err)

	_, err = codec.Deserialize(context.Background(), m, []byte(`{"id":"o-2"}`)) // not gzip
	stage, _ := serde.StageOf(err)
	fmt.Println(stage, failure.Classify(err))
	// Output:
	// {o-1 9.5} <nil>
	// gzip permanent
}

func ExampleRetry() {
	calls := 0
	registry := serde.DeserializerFunc[Order](func(context.Context, serde.Meta, []byte) (Order, error) {
		calls++
		if calls < 3 {
			return Order{}, fmt.Errorf("schema registry: %w", syscall.ECONNREFUSED) // transient
		}
		return Order{ID: "o-1"}, nil
	})
	p := backoff.MaxAttempts(backoff.Exponential{Initial: time.Millisecond}, 5)

	o, err := serde.Retry(registry, p).Deserialize(context.Background(), serde.Meta{}, nil)
	fmt.Println(o.ID, err, calls)

	_, err = serde.Retry(serde.JSON[Order](), p).Deserialize(context.Background(), serde.Meta{}, []byte("garbage"))
	var re *serde.RetryError
	errors.As(err, &re)
	fmt.Println(re.Attempts, re.Reason)
	// Output:
	// o-1 <nil> 3
	// 1 not retryable
}

func ExampleHandle() {
	d := serde.Handle(serde.Retry(serde.Pipe(serde.JSON[Order](serde.Strict())), backoff.Exponential{}))
	m := serde.Meta{Topic: "orders", Part: serde.Value}

	for _, data := range []string{`{"id":"o-1","amount":3}`, `{"id":"o-2","colour":"red"}`} {
		r, err := d.Deserialize(context.Background(), m, []byte(data))
		switch {
		case err != nil:
			fmt.Println("stop:", err) // shutdown, or an error HandleOnly let through
		case r.OK():
			fmt.Println("process", r.Value.ID)
		default:
			f := r.Failure
			fmt.Printf("dead-letter %s %s: stage=%s class=%v bytes=%d\n", f.Topic, f.Part, f.Stage, f.Class, len(f.Data))
		}
	}
	// Output:
	// process o-1
	// dead-letter orders value: stage=json class=permanent bytes=27
}

func ExampleFallback() {
	d := serde.Fallback(serde.JSON[Order](), func(_ context.Context, _ serde.Meta, data []byte, err error) (Order, error) {
		if failure.IsPermanent(err) {
			return Order{ID: "unreadable"}, nil // a substitute value for the handler
		}
		return Order{}, err
	})
	o, err := d.Deserialize(context.Background(), serde.Meta{}, []byte("\x00\x01"))
	fmt.Println(o.ID, err)
	// Output:
	// unreadable <nil>
}
