// Package backoff holds stateless retry policies.
//
// A [Policy] answers one question: after attempt failures, elapsed time
// since the first one, how long should we wait before the next try, if at
// all? It keeps no state, so the attempt count and the first-failure time can
// live anywhere: in a loop variable, or in Kafka headers that survive a
// restart and a trip through a retry topic.
//
// # Policies
//
//   - [None] never retries.
//   - [Fixed] waits the same duration between tries, forever.
//   - [Exponential] grows the wait by a multiplier up to a cap, with optional
//     jitter ([JitterNone], [JitterFull], [JitterEqual]), forever. Its zero
//     value is a sane default: 100ms, 200ms, 400ms, ... capped at 30s.
//   - [MaxAttempts] and [MaxElapsed] bound any policy by tries or by time.
//
// A bounded exponential policy reads like its sentence:
//
//	p := backoff.MaxAttempts(backoff.Exponential{Initial: 200 * time.Millisecond, Jitter: backoff.JitterFull}, 5)
//	if err := backoff.Validate(p); err != nil {
//		return err // fail at startup, with a message naming the field
//	}
//
// # Waiting
//
// [Next] is Policy.Next that also honours a [failure.RetryAfter] hint
// carried by the error. [Sleep] waits on a timer and returns early when the
// context is done: a retry loop never spins. [StopCause] tells why a policy
// stopped ([ErrMaxAttempts], [ErrMaxElapsed]).
//
// A retry loop:
//
//	start := time.Now()
//	for attempt := 1; ; attempt++ {
//		err := try(ctx)
//		if err == nil || !failure.IsTransient(err) {
//			return err
//		}
//		wait, ok := backoff.Next(p, attempt, time.Since(start), err)
//		if !ok {
//			return err
//		}
//		if err := backoff.Sleep(ctx, wait); err != nil {
//			return err
//		}
//	}
package backoff
