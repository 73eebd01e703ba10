package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// Settling a failure: retry in place under the policy's backoff (the
// partition pauses and the worker sleeps), then the policy's action.

// minHintWait is the shortest wait a failure.RetryAfter hint can ask for: a
// hint of zero, repeated, must not become a hot loop.
const minHintWait = 10 * time.Millisecond

// retryWait is how long to wait before the next try: the policy's wait, or
// the failure's own failure.RetryAfter hint when it has one (an HTTP
// Retry-After, a circuit breaker's next probe: the dependency knows when a
// try is worth it). ok is false when the policy says stop.
func retryWait(p backoff.Policy, attempt int, elapsed time.Duration, err error) (time.Duration, bool) {
	w, ok := p.Next(attempt, elapsed)
	if !ok {
		return 0, false
	}
	if h, hinted := failure.RetryAfterOf(err); hinted {
		return max(h, minHintWait), true
	}
	return max(w, 0), true
}

// settleFailure is the slow path: retry in place, then the policy's action.
// attempt is the try that failed and first the time of the first failure
// (zero: now); both come from the durable attempts after a restart.
func (p *partition[K, V]) settleFailure(rec *kgo.Record, o *origin, stage deadletter.Stage, err error, attempt int, first time.Time) bool {
	c := p.c
	if p.startSpan(rec, o) {
		defer endSpan(o)
	}
	if first.IsZero() {
		first = time.Now()
	}
	savedAt := 0 // the attempts rec's durable entry holds, when saved here (o.saved)
	// cut: the last try ended with the worker stopping and failed with a
	// context error, so its failure may be our own cancellation, not a try
	// to count. Any other failure is one.
	cut := p.cutShort(err)
	// stopping: revoked or stopping. The attempts so far are saved for
	// the next owner (one failure is saved only now: a record that fails
	// once and then succeeds never writes). The last try does not count
	// when its failure may be our own cancellation (cut), but the tries
	// before it do.
	stopping := func() bool {
		done := attempt
		if cut {
			done--
		}
		if done > savedAt && done > 0 {
			c.attempts.save(rec, done, first)
		}
		return false
	}
	if !p.beforeWait() { // the records before this one, before any wait
		return stopping()
	}
	defer func() {
		// Settled: the entry goes. Stopping (revoked, shut down, halted):
		// it stays, and the next owner goes on counting. Settled by a
		// letter: the letter clears it once it is settled itself
		// (letterDone), since a letter that is never written leaves rec
		// to the next owner.
		if o.saved && p.ctx.Err() == nil && !o.lettered {
			c.attempts.clear(rec)
		}
	}()
	// The record's own context, which an operator skip cancels, is made
	// only when the record waits for a retry: a dead letter at once does
	// not pay for it.
	rctx, rcancel := p.ctx, context.CancelCauseFunc(nil)
	defer func() {
		if rcancel != nil {
			rcancel(nil)
		}
	}()
	defer p.clearStuck(rec.Offset)
	skipped := func() bool { return rcancel != nil && errors.Is(context.Cause(rctx), errSkipped) }

	for {
		if p.ctx.Err() != nil {
			return stopping()
		}
		if skipped() {
			return p.skip(rec, o, stage, err, attempt, "operator")
		}
		if rcancel != nil {
			if who, ok := byOperator(rctx); ok {
				p.clearStuck(rec.Offset)
				return p.letterByOperator(rec, o, stage, c.classify(stage, err), err, attempt, first, who)
			}
		}
		if c.cfg.SkipIf != nil && p.skipFunc(rec, stage, err) {
			p.clearStuck(rec.Offset)
			return p.skip(rec, o, stage, err, attempt, "Config.SkipIf")
		}
		// Taken before the kill switch is read, so that a flip between the
		// two still wakes the sleep below.
		wake := c.wakeSignal()
		class := c.classify(stage, err)
		out := c.policy.outcome(stage, class)
		if c.retryOff.Load() {
			// The kill switch: no waiting, straight to the exhausted outcome.
			_, canRetry := out.Retry.Next(attempt, time.Since(first))
			if canRetry || (out.Then == ActionRetryTopic && o.tiers < len(c.tiers.cfg.Tiers)) {
				p.clearStuck(rec.Offset)
				then := out.Then
				if then == ActionRetryTopic {
					then = c.tiers.cfg.Then // no tiers either
				}
				return p.act(rec, o, stage, class, err, attempt, first, deadletter.ReasonRetryDisabled, then)
			}
		} else if wait, ok := retryWait(out.Retry, attempt, time.Since(first), err); ok {
			if rcancel == nil {
				rctx, rcancel = context.WithCancelCause(p.ctx)
			}
			p.outcome(rec, stage, class, OutcomeRetried)
			if h := c.hooks; h != nil {
				h.RecordRetried(RetryEvent{PartitionEvent: PartitionEvent{p.topic, p.part}, Offset: rec.Offset, Stage: stage, Class: class, Attempt: attempt, Wait: wait})
			}
			p.setStuck(stuck{offset: rec.Offset, reason: StuckRetrying, attempts: attempt, since: first, lastErr: err, cancel: rcancel})
			if attempt >= 2 && attempt > savedAt {
				c.attempts.save(rec, attempt, first)
				o.saved, savedAt = true, attempt
			}
			if attempt == 1 || attempt%10 == 0 {
				p.log.warn("record failed, retrying", rec, "stage", stage, "class", class, "attempt", attempt, "wait", dur(wait), "err", err)
			}
			if sleep(rctx, wait, wake) != nil || c.retryOff.Load() {
				continue // stopping, skipped or kill switch: re-decide at the top
			}
			// The letters of records before this one, acknowledged
			// meanwhile, are counted and their offsets marked: a record
			// that retries for long does not hold them back.
			if !p.beforeWait() {
				return stopping()
			}
			attempt++
			pstage, perr := stage, err
			stage, err = p.try(rctx, o, attempt, first)
			cut = p.cutShort(err)
			if _, ok := byOperator(rctx); ok && err != nil {
				// The try was cut short for the operator: the letter
				// tells the failure that held the record.
				stage, err, attempt = pstage, perr, attempt-1
			}
			if err == nil {
				err = p.outputFailed(rec)
			}
			if err == nil {
				p.clearStuck(rec.Offset) // no longer skippable
				p.processed(rec, o)
				p.log.info("record recovered after retry", rec, "attempts", attempt)
				return p.settledOut(rec, o.out)
			}
			continue
		}
		reason := deadletter.ReasonExhausted
		if class == failure.ClassPermanent {
			reason = deadletter.ReasonPermanent
		}
		p.clearStuck(rec.Offset) // settled below: no longer skippable
		return p.act(rec, o, stage, class, err, attempt, first, reason, out.Then)
	}
}

// cutShort tells whether a try that failed with err may have been cut short
// by the worker stopping (revoked, shut down, halted): the worker's context
// is done and err is a context error, or serde.Retry's error for retries
// its context ended. Such a try is not counted as one of the record's
// attempts; a failure of any other kind is, even when the worker stopped
// just after it.
func (p *partition[K, V]) cutShort(err error) bool {
	if p.ctx.Err() == nil {
		return false
	}
	var re *serde.RetryError
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &re) && re.Reason == serde.StopCanceled)
}

// skipFunc asks Config.SkipIf; a panic in it counts as "no" and is logged.
func (p *partition[K, V]) skipFunc(rec *kgo.Record, stage deadletter.Stage, err error) (skip bool) {
	defer func() {
		if v := recover(); v != nil {
			p.log.error("Config.SkipIf panicked; the failure is settled by the policy", rec, "panic", v)
			skip = false
		}
	}()
	return p.c.cfg.SkipIf(stage, err)
}

// classify applies the classifier and the deserialize-stage rule: an
// unclassified decode error is permanent.
func (c *Consumer[K, V]) classify(stage deadletter.Stage, err error) failure.Class {
	class := c.classifier.Classify(err)
	if class == failure.ClassUnclassified && stage != deadletter.StageProcess {
		return failure.ClassPermanent
	}
	return class
}

// act settles rec by then: a dead letter, a skip, a halt or a retry tier.
// o.rec is what the letter is made of (the original of a tier record).
func (p *partition[K, V]) act(rec *kgo.Record, o *origin, stage deadletter.Stage, class failure.Class, err error, attempts int, first time.Time, reason deadletter.Reason, then Action) bool {
	c := p.c
	if then == ActionRetryTopic {
		if o.tiers < len(c.tiers.cfg.Tiers) && c.tiers.names[o.rec.Topic] != nil {
			return p.forward(rec, o, stage, class, err, attempts, first)
		}
		then, reason = c.tiers.cfg.Then, deadletter.ReasonExhausted // after the last tier
	}
	switch then {
	case ActionSkip:
		return p.skip(rec, o, stage, err, attempts, string(reason))
	case ActionHalt:
		o.trace.settledAs(OutcomeHalted, stage, class, err, attempts)
		p.outcome(rec, stage, class, OutcomeHalted)
		p.log.error("halting on record", rec, "stage", stage, "class", class, "err", err)
		c.halt(&HaltError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Stage: string(stage), Err: err})
		return false
	}
	if ok, skipped := p.guardFlood(rec); skipped {
		return p.skip(rec, o, stage, err, attempts, "operator")
	} else if !ok {
		return false
	}
	p.floodAdd(true)
	p.untrack(o)
	o.trace.settledAs(OutcomeDeadLettered, stage, class, err, attempts)
	l := c.dlq.newLetter(o.rec, newFailure(c.cfg.Group, o.rec, stage, class, reason, err, attempts, first), err, o.trace)
	l.class, l.attempts = class, attempts
	l.clearsAttempts(&c.attempts, rec, o)
	return p.settleLetter(rec, l)
}

// letterByOperator dead-letters rec because an operator asked (who), with
// the failure that held it: reason ReasonOperator, the message naming who.
func (p *partition[K, V]) letterByOperator(rec *kgo.Record, o *origin, stage deadletter.Stage, class failure.Class, err error, attempts int, first time.Time, who string) bool {
	f := newFailure(p.c.cfg.Group, o.rec, stage, class, deadletter.ReasonOperator, err, attempts, first)
	f.Message = deadletter.Truncate("dead-lettered by an operator ("+who+"): "+f.Message, deadletter.MaxMessageBytes)
	p.log.warn("record sent to the dead-letter topic by an operator", rec, "stage", stage, "who", who, "attempts", attempts, "err", err)
	return p.operatorLetter(rec, o, f, class, err)
}

// operatorLetter writes f, an operator's dead letter of rec: past the
// flood guard, which holds back the policy's letters, not an operator's.
func (p *partition[K, V]) operatorLetter(rec *kgo.Record, o *origin, f *deadletter.Failure, class failure.Class, err error) bool {
	c := p.c
	p.floodAdd(true)
	p.untrack(o)
	o.trace.settledAs(OutcomeDeadLettered, f.Stage, class, err, f.Attempts)
	l := c.dlq.newLetter(o.rec, f, err, o.trace)
	l.class, l.attempts = class, f.Attempts
	l.clearsAttempts(&c.attempts, rec, o)
	return p.settleLetter(rec, l)
}

// newFailure is the failure headers of rec, failed at stage with err.
func newFailure(group string, rec *kgo.Record, stage deadletter.Stage, class failure.Class, reason deadletter.Reason, err error, attempts int, first time.Time) *deadletter.Failure {
	f := &deadletter.Failure{
		Stage: stage, Reason: reason, Class: class.String(),
		ErrorType: deadletter.ErrorType(err), Message: err.Error(),
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp,
		OriginalHeaders: len(rec.Headers), Group: group, Attempts: attempts,
		First: first, Last: time.Now(),
	}
	if s, ok := serde.StageOf(err); ok && stage != deadletter.StageProcess {
		f.ErrorStage = s
	}
	if sf, ok := errors.AsType[*savedFailure](err); ok {
		// The failure of a try before the partition moved, as its letter
		// told it.
		f.ErrorType, f.ErrorStage = sf.typ, sf.stage
	}
	return f
}

func (p *partition[K, V]) skip(rec *kgo.Record, o *origin, stage deadletter.Stage, err error, attempts int, why string) bool {
	c := p.c
	p.untrack(o)
	class := c.classify(stage, err)
	o.trace.settledAs(OutcomeSkipped, stage, class, err, attempts)
	p.outcome(rec, stage, class, OutcomeSkipped)
	p.log.warn("record skipped", rec, "stage", stage, "why", why, "attempts", attempts, "err", err)
	p.floodAdd(false)
	return p.settled(rec)
}

// sleep waits d, or until ctx ends or wake is closed (the kill switch,
// WakeRetries).
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-wake:
		return nil
	}
}
