package failure_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"syscall"

	"github.com/antidote-kafka/antidote/failure"
)

func ExampleClassify() {
	corrupt := fmt.Errorf("decode order: %w", failure.Permanent(errors.New("bad magic byte")))
	outage := fmt.Errorf("schema registry: %w", syscall.ECONNREFUSED)
	unknown := errors.New("something odd")

	fmt.Println(failure.Classify(corrupt))
	fmt.Println(failure.Classify(outage))
	fmt.Println(failure.Classify(unknown))
	fmt.Println(failure.Classify(errors.Join(unknown, context.DeadlineExceeded)))
	// Output:
	// permanent
	// transient
	// unclassified
	// transient
}

func ExampleNewClassifier() {
	errNoCustomer := errors.New("no such customer")
	c := failure.NewClassifier(
		failure.Sentinel(errNoCustomer, failure.ClassPermanent),
		failure.MessageMatches(regexp.MustCompile(`too many connections`), failure.ClassTransient),
	)
	fmt.Println(c.Classify(fmt.Errorf("order 42: %w", errNoCustomer)))
	fmt.Println(c.Classify(errors.New("pq: sorry, too many connections")))
	// Output:
	// permanent
	// transient
}
