package backoff

import "errors"

var (
	// ErrInvalid is wrapped by every error of [Validate] and the Validate
	// methods.
	ErrInvalid = errors.New("backoff: invalid policy")

	// ErrMaxAttempts is the [StopCause] of a policy that ran out of tries
	// ([MaxAttempts], [None]).
	ErrMaxAttempts = errors.New("backoff: max attempts reached")

	// ErrMaxElapsed is the [StopCause] of a policy that ran out of time
	// ([MaxElapsed]).
	ErrMaxElapsed = errors.New("backoff: max elapsed time reached")

	// ErrStopped is the [StopCause] of a policy that stopped without saying
	// why.
	ErrStopped = errors.New("backoff: policy stopped")
)
