package backoff_test

import (
	"fmt"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
)

func ExampleExponential() {
	// Five tries in all: four waits, doubling from 100ms, capped at 500ms.
	p := backoff.MaxAttempts(backoff.Exponential{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond}, 5)
	if err := backoff.Validate(p); err != nil {
		panic(err)
	}
	for attempt := 1; ; attempt++ {
		wait, ok := p.Next(attempt, 0)
		if !ok {
			fmt.Printf("after failure %d: give up (%v)\n", attempt, backoff.StopCause(p, attempt, 0))
			break
		}
		fmt.Printf("after failure %d: wait %v\n", attempt, wait)
	}
	// Output:
	// after failure 1: wait 100ms
	// after failure 2: wait 200ms
	// after failure 3: wait 400ms
	// after failure 4: wait 500ms
	// after failure 5: give up (backoff: max attempts reached)
}

func ExampleValidate() {
	err := backoff.Validate(backoff.Exponential{Initial: -time.Second})
	fmt.Println(err)
	// Output:
	// backoff: invalid policy: Exponential.Initial is negative (-1s)
}
