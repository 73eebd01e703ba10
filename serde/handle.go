package serde

import (
	"bytes"
	"context"

	"github.com/antidote-kafka/antidote/failure"
)

// Result is the outcome of a [Handle]d deserializer: a value, or a failure.
type Result[T any] struct {
	// Value is the decoded value; the zero value when Failure is set.
	Value T
	// Failure describes why the bytes could not be decoded; nil on success.
	Failure *Failure
}

// OK reports whether r holds a value.
func (r Result[T]) OK() bool { return r.Failure == nil }

// Failure is a record part that could not be deserialized, with everything a
// dead letter needs. It is an error itself, so it can be passed on.
type Failure struct {
	// Topic is the record's topic.
	Topic string
	// Part is the record part that failed.
	Part Part
	// Stage names the stage or codec that failed ([StageOf]); "" if unknown.
	Stage string
	// Class is the class of Err. Unclassified errors are recorded as
	// permanent: see [Handle].
	Class failure.Class
	// Err is the error.
	Err error
	// Data is a copy of the raw bytes: the caller's buffer is not kept.
	Data []byte
}

// Error returns Err's message.
func (f *Failure) Error() string { return f.Err.Error() }

// Unwrap returns f.Err.
func (f *Failure) Unwrap() error { return f.Err }

// A HandleOption configures [Handle].
type HandleOption func(*handleConfig)

type handleConfig struct {
	only       failure.Matcher
	classifier failure.Classifier
}

// HandleOnly chooses which errors become a [Failure]: those that m matches,
// recorded with the class m returns. Other errors are returned as errors.
// Optional; by default every error becomes a Failure. For example, to let
// transient errors propagate (and pause the partition) while permanent ones
// become values:
//
//	serde.Handle(d, serde.HandleOnly(failure.OfClass(failure.ClassPermanent)))
func HandleOnly(m failure.Matcher) HandleOption {
	return func(cfg *handleConfig) { cfg.only = m }
}

// HandleClassifier sets the classifier that fills Failure.Class when
// [HandleOnly] is not used. Optional; default [failure.Default]. Give it the
// same classifier as [RetryClassifier].
func HandleClassifier(c failure.Classifier) HandleOption {
	return func(cfg *handleConfig) { cfg.classifier = c }
}

// Handle returns a deserializer that turns d's failures into values: a
// [Result] holding either the value or a [Failure] with the error, its class,
// the stage that failed and a copy of the raw bytes. The consumer can then
// settle the record (dead letter, skip) instead of failing at poll forever.
//
// Handle applies the deserialize-stage rule: an unclassified error is
// recorded as [failure.ClassPermanent], because retrying bytes no one can
// read is what creates infinite loops. Wrap d in [Retry] to retry transient
// errors before they become failures.
//
// When ctx is done, Handle returns d's error as an error, not as a Failure: a
// record interrupted by shutdown is not a poison pill. A panic in d is
// recovered and becomes a permanent Failure.
//
// On success Handle costs one indirect call and returns the Result by value:
// no allocation.
func Handle[T any](d Deserializer[T], opts ...HandleOption) Deserializer[Result[T]] {
	h := &handle[T]{d: d, name: nameOf(d, "deserializer")}
	h.leaf, h.links = flatten(d)
	h.leafName = h.name
	if len(h.links) > 0 {
		h.leafName = h.links[len(h.links)-1].innerName()
	}
	h.classifier = failure.Default()
	for _, o := range opts {
		o(&h.handleConfig)
	}
	return h
}

type handle[T any] struct {
	d        Deserializer[T]
	name     string
	leaf     Deserializer[T] // called on the success path
	links    []link[T]       // between d and leaf, outermost first
	leafName string
	handleConfig
}

func (h *handle[T]) Name() string { return h.name }

func (h *handle[T]) Deserialize(ctx context.Context, m Meta, data []byte) (res Result[T], err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = h.slow(ctx, m, data, newPanicError(h.leafName, m.Part, r))
		}
	}()
	// Decoding straight into the named result saves a copy of T.
	if res.Value, err = h.leaf.Deserialize(ctx, m, data); err != nil {
		return h.slow(ctx, m, data, err)
	}
	return res, nil
}

// slow runs the error handling of the links (Pipe's wrapping, Retry's
// retries), innermost first, then turns what is left into a Failure.
func (h *handle[T]) slow(ctx context.Context, m Meta, data []byte, err error) (Result[T], error) {
	for i := len(h.links) - 1; i >= 0; i-- {
		var v T
		if v, err = h.links[i].onError(ctx, m, data, err); err == nil {
			return Result[T]{Value: v}, nil
		}
	}
	return h.fail(ctx, m, data, err)
}

func (h *handle[T]) fail(ctx context.Context, m Meta, data []byte, err error) (Result[T], error) {
	if ctx.Err() != nil && !IsPanic(err) {
		return Result[T]{}, err
	}
	var class failure.Class
	if h.only != nil {
		c, ok := h.only.Match(err)
		if !ok {
			return Result[T]{}, err
		}
		class = c
	} else {
		class = h.classifier.Classify(err)
	}
	if class == failure.ClassUnclassified {
		class = failure.ClassPermanent
	}
	stage, _ := StageOf(err)
	return Result[T]{Failure: &Failure{
		Topic: m.Topic,
		Part:  m.Part,
		Stage: stage,
		Class: class,
		Err:   err,
		Data:  bytes.Clone(data),
	}}, nil
}
