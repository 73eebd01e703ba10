package failure

import (
	"errors"
	"regexp"
)

// A Classifier tells the class of an error.
//
// Classify must be safe for concurrent use by many goroutines, must not block,
// and must not keep err. A nil err has no class: Classify returns
// [ClassUnclassified].
type Classifier interface {
	Classify(err error) Class
}

// ClassifierFunc adapts a function to the [Classifier] interface.
type ClassifierFunc func(err error) Class

// Classify returns f(err).
func (f ClassifierFunc) Classify(err error) Class { return f(err) }

// A Matcher recognises some errors and tells their class. It reports false for
// errors it does not recognise. Like a [Classifier], it must be safe for
// concurrent use and must not block.
type Matcher interface {
	Match(err error) (Class, bool)
}

// MatcherFunc adapts a function to the [Matcher] interface.
type MatcherFunc func(err error) (Class, bool)

// Match returns f(err).
func (f MatcherFunc) Match(err error) (Class, bool) { return f(err) }

// Sentinel matches errors for which errors.Is(err, target) is true.
func Sentinel(target error, c Class) Matcher {
	return MatcherFunc(func(err error) (Class, bool) {
		return c, errors.Is(err, target)
	})
}

// AsType matches errors whose tree holds an error of type T (errors.AsType).
//
//	failure.AsType[*pgconn.PgError](failure.ClassTransient)
func AsType[T error](c Class) Matcher {
	return MatcherFunc(func(err error) (Class, bool) {
		_, ok := errors.AsType[T](err)
		return c, ok
	})
}

// MessageMatches matches errors whose full message (err.Error(), which
// normally includes the messages of wrapped errors) matches re. Prefer
// [Sentinel] or [AsType] when the error has a type: messages change.
func MessageMatches(re *regexp.Regexp, c Class) Matcher {
	return MatcherFunc(func(err error) (Class, bool) {
		return c, re.MatchString(err.Error())
	})
}

// When matches errors for which pred returns true.
func When(pred func(err error) bool, c Class) Matcher {
	return MatcherFunc(func(err error) (Class, bool) {
		return c, pred(err)
	})
}

// OfClass matches errors that the default classifier ([Classify]) puts in
// class c. It is meant for options that select errors by class, such as
// "turn only permanent errors into values".
func OfClass(c Class) Matcher {
	return MatcherFunc(func(err error) (Class, bool) {
		return c, Classify(err) == c
	})
}

// NewClassifier returns a classifier that decides, in this order:
//
//  1. the outermost explicit mark in the error's tree ([Permanent],
//     [Transient], [RetryAfter]);
//  2. the first of matchers that matches, in the order given;
//  3. the defaults (see the package documentation);
//  4. otherwise [ClassUnclassified].
//
// A matcher that reports [ClassUnclassified] with true stops the search: use
// it to exempt an error from the defaults.
func NewClassifier(matchers ...Matcher) Classifier {
	return &classifier{matchers: append([]Matcher(nil), matchers...)}
}

type classifier struct {
	matchers []Matcher
}

func (c *classifier) Classify(err error) Class {
	if err == nil {
		return ClassUnclassified
	}
	if cl, ok := MarkOf(err); ok {
		return cl
	}
	for _, m := range c.matchers {
		if cl, ok := m.Match(err); ok {
			return cl
		}
	}
	if cl, ok := matchDefaults(err); ok {
		return cl
	}
	return ClassUnclassified
}

var defaultClassifier = NewClassifier()

// Default is the classifier used by [Classify]: explicit marks, then the
// defaults table. It has no user matchers.
func Default() Classifier { return defaultClassifier }

// Classify classifies err with the [Default] classifier.
func Classify(err error) Class { return defaultClassifier.Classify(err) }

// Defaults is a [Matcher] for the defaults table in the package
// documentation. [NewClassifier] already applies it after the user matchers;
// it is exported for classifiers built by hand.
func Defaults() Matcher { return MatcherFunc(matchDefaults) }
