// Package consumer runs a Kafka consumer-group member that never blocks on a
// poison pill and never loses a record.
//
// A [Consumer] fetches with franz-go, decodes each record with the key and
// value deserializers of package serde, calls your [Handler], settles every
// failure by a [Policy], and commits only offsets below which every record is
// settled:
//
//	fetch -> decode key -> decode value -> process -> settle -> commit
//
// # Getting started
//
//	c, err := consumer.New(consumer.Config[string, Order]{
//		Brokers: []string{"localhost:9092"},
//		Topics:  []string{"orders"},
//		Group:   "billing",
//		Key:     serde.String(),
//		Value:   serde.JSON[Order](),
//		Handler: func(ctx context.Context, r *consumer.Record[string, Order]) error {
//			return bill(ctx, r.Value) // mark errors with failure.Permanent / failure.Transient
//		},
//	})
//	if err != nil {
//		log.Fatal(err) // invalid configuration names the key and the reason
//	}
//	err = c.Run(ctx) // blocks until ctx ends, or a Halt policy stops it
//
// To exit in a way a supervisor reads correctly, return Run's error only when
// it is one: Run returns nil after ctx ends (SIGTERM, say) and a *HaltError
// when a Halt policy stopped it:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	if err := c.Run(ctx); err != nil {
//		log.Fatal(err) // exit status 1: halted on a record
//	}
//
// # Order and concurrency
//
// Each assigned partition has its own worker: the records of one partition
// are handled one at a time, in offset order; partitions run concurrently.
// A partition that is retrying a record has its fetching paused
// (kgo.Client.PauseFetchPartitions) while every other partition keeps flowing.
//
// A handler that waits on I/O is then capped by the partition count. With
// [Config.Concurrency] (Max > 1), a partition handles up to Max records at
// once: records of one key one at a time, in offset order, different keys in
// parallel; a record retried in place holds back only its own key. Offsets are
// still committed only below the lowest unsettled record, and how far a
// partition runs ahead of it is bounded. See [Concurrency].
//
// A bulk sink takes a [BatchHandler] instead ([Config.BatchHandler],
// [Config.Batching]): decoded records of one partition, up to a size and a
// linger. It fails single records with a [*BatchError], so one bad record in
// a batch of 500 is settled alone and the 499 others are processed once; a
// batch that fails as a whole is retried as a batch (transient) or tried
// record by record to find the poison pill (permanent, or a panic). Records
// that cannot be decoded are settled before the batch and never reach it.
//
// With a [BatchHandler] and Concurrency, a partition's records are split by
// key into Max shards that each run batches: up to Max batches at once, a
// key's records in one shard, in offset order.
//
// # Exactly once
//
// A consumer that writes its results to Kafka can write them, its dead
// letters and the commit of its offsets in one Kafka transaction:
// [Config.ExactlyOnce] with a transactional id per member, and the handler's
// outputs given to [Record.Produce]. Outputs are written only when the
// handler returns nil; a transaction is committed every MaxRecords settled
// records or Interval, and one that cannot commit is aborted and its records
// handled again. A read_committed reader of the outputs sees each once,
// whatever crashes. It combines with every way of reaching the handler.
//
// # Modes, and what each combination guarantees
//
// How records reach the handler is chosen once per partition: one at a time,
// keyed lanes ([Concurrency]), batches ([BatchHandler]), or batches in key
// shards (both). How a settled record is recorded is chosen once too: the
// commit ledger, or the transaction ([ExactlyOnce]). [RetryTopics] and
// [DurableAttempts] serve every one of them. Every combination works:
//
//	how records reach       order the handler sees          a crash repeats (commit ledger)
//	one at a time           partition, offset order         unsettled records, and settled
//	                                                        ones not committed yet
//	Concurrency             key, offset order               the same, and records of other
//	                                                        keys settled past the lowest
//	                                                        unsettled one
//	BatchHandler            partition, offset order; a      the same as one at a time
//	                        record failed in a batch is
//	                        retried after its batch
//	BatchHandler and        key, offset order, as above     the same as Concurrency
//	Concurrency
//
//	with                    adds
//	ExactlyOnce             outputs, dead letters and offsets in one transaction: a crash
//	                        may run the handler again, but a read_committed reader sees
//	                        each output once; records settled out of order are written
//	                        in offset order
//	RetryTopics             the partition moves on while a record waits in a tier; per-key
//	                        order is kept (a batch holds one record of a key); a crash may
//	                        try a tier copy once more
//	DurableAttempts         the attempt count of a record retried in place survives a
//	                        restart, in every way of reaching the handler (a record a
//	                        batch failed goes on counting when it fails again; a batch
//	                        retried whole counts from 1 again); not kept with
//	                        ExactlyOnce (the state would be written outside the
//	                        transactions)
//
// In every mode nothing is lost: a record is processed, dead-lettered or
// skipped before any offset passes it. Tests that run on kfake and on a real
// broker back the table: TestIntegrationExactlyOnce (each way of reaching the
// handler, with transactions), TestIntegrationExactlyOnceKill (one at a time
// and lanes, with transactions, under SIGKILL), TestIntegrationRetryTopics
// (tiers with each way of reaching the handler, with and without
// transactions) and TestIntegrationDurableAttempts (each way of reaching the
// handler); TestBatchConcurrency also checks on kfake that key shards run
// batches at once, one shard per key.
//
// # Memory
//
// What the consumer holds is bounded ([Config.Buffer], [BufferLimits]): per
// partition in records and bytes, counting what is queued, being handled and
// dead-lettered with the letter not yet acknowledged; and in total for the flowing
// partitions. The total is kept by not polling, which drops nothing; a
// partition that holds its own bound has its fetching paused where franz-go
// drops nothing by it, while the others keep flowing; when its records are
// the last of its broker's fetch, another partition of that broker is first
// moved after it in the broker's fetch session. When that fails, it holds
// back the poll loop until it is back under half of its bound, or until
// the member's other flowing partitions have no records left: then it is
// paused with its one record in the client, whose batch is fetched again
// (unless a rotation can start then); a paused partition (stuck on
// a record, full, or paused by an operator) leaves the total. Each poll takes all the client has fetched, so
// the bounds are exceeded by at most one fetch per broker (see
// [BufferLimits]).
//
// # Share groups
//
// With [Config.ShareGroup] instead of Group, the consumer is a member of a
// share group (KIP-932, Kafka 4.2+, "queues for Kafka"): the broker hands
// records to any member that polls, several members may read one
// partition, and each record is settled by an acknowledgement instead of a
// commit. The deserializers, the [Handler], the failure classes and the
// [Policy] are the same; what they lead to is:
//
//	outcome                                      acknowledgement
//	processed                                    ACCEPT
//	failed, retried in place (Rule.Retry)        RENEW, while it waits: the lock never runs out
//	retries spent, transient or unclassified,    RELEASE: delivered again at once, to any member
//	and the delivery count below the limit
//	permanent, or the last delivery              dead letter (the record byte for byte, the
//	                                             usual headers and antidote.delivery.count),
//	                                             acknowledged by Kafka, then ACCEPT
//	skipped (Then: ActionSkip, SkipIf)           ACCEPT
//	halted, or the member stops                  none: the client RELEASEs it as it closes
//
// REJECT is never sent: Kafka 4.4 would write a dead letter of its own
// beside ours. The delivery limit is the group's (share.delivery.count.limit
// on Kafka 4.3+, else the brokers' group.share.delivery.count.limit), read
// when Run starts and every 30s, or [Share.DeliveryLimit]. The retry policy
// counts the tries of one delivery ([Record.Attempt] starts at 1 on each);
// Record.Raw.DeliveryCount() is the broker's count. The kill switch turns
// both retrying and releasing off. A new group reads only records produced
// after it started unless [Share.FromEarliest] is set.
//
// Concurrency: a member acquires at most [Share.MaxRecords] records per
// poll (500; the broker splits a record batch to keep to it) and handles
// them [Concurrency].Max at once (one by default), the records of one key
// in a poll one at a time, in offset order. It polls again only when every
// record of the last poll is settled, because franz-go's next poll ACCEPTs
// every record the last one left without a final acknowledgement, and it
// fetches only while it polls, so that no record waits unseen while its
// lock runs out. A record retried in place therefore holds back its
// member's next poll (not the other members); raise Concurrency.Max so
// that the rest of the poll goes on meanwhile. To scale, add members:
// unlike a consumer group, a share group puts members beyond the partition
// count to work on the same partitions (three members share one partition
// in TestIntegrationShareMembersBeyondPartitions). There is no order across
// polls or members.
//
// Guarantees: a record is ACCEPTed only once it was processed, skipped, or
// dead-lettered with the letter acknowledged. A member that stops, crashes
// or is killed, or halts, holds its unsettled records until its connection
// closes (at once, for a killed process) or their lock runs out; they are
// then delivered again with their delivery count raised, and a record that
// was on its last delivery is archived by the broker instead: it reaches
// Kafka's own dead-letter topic, if the group has one, not ours. So is a
// record on its last delivery in a fetch the client drops (franz-go drops
// the records of a fetch in flight when its share session is reset: the
// member was fenced, an acknowledgement request failed). These are the
// ways a share group loses a record here, and the reason to set up the
// broker's dead-letter topic (see below). Processing is at least once: a record whose ACCEPT
// did not reach the broker (the member died, the connection dropped) is
// delivered again, and handled, or dead-lettered, a second time.
//
// Operating it: [Stats] counts records as for a consumer group, with
// releases as [OutcomeReleased] in Stats.Outcomes, and [Stats.ShareGroup]
// holds the delivery limit in use, what is wrong with the group's setup,
// the records acquired (by delivery count, and how many were delivered
// before) and the acknowledgements sent (accepted, released, renewed);
// [Hooks] hear of each acquisition and acknowledgement (RecordAcquired,
// RecordAcknowledged). When Run starts, the member checks the broker's own dead-letter
// topic of the group (Kafka 4.4: errors.deadletterqueue.topic.name must
// name an existing topic with the brokers' "dlq." prefix and
// errors.deadletterqueue.group.enable=true, or the broker loses what it
// would dead-letter) and that renewals are on, and reports a broken setup
// as an error with what to change. The kill switch and
// [Consumer.WakeRetries] work as for a consumer group. A record retried in
// place shows in Stats.Stuck (by its partition and offset), and
// [Consumer.Skip] and [Consumer.DeadLetter] end its retries as they do for
// a partition. A member owns no partition: Pause and Resume return an error
// wrapping [ErrNotAssigned], and the flood guard is not part of this mode.
//
// [RetryTopics], [ExactlyOnce], a [BatchHandler] and DurableAttempts.Topic
// are refused by [New]: the group redelivers a record itself and counts its
// deliveries, and its acknowledgements are not part of Kafka transactions.
// TestIntegrationShareGroup (records over three members after a fourth is
// killed holding records), TestIntegrationShareRenew,
// TestIntegrationShareDeliveryLimit, TestIntegrationShareStop,
// TestIntegrationShareHalt and TestIntegrationShareUnwritable back this on
// kfake and on Kafka 4.4; TestIntegrationShareBrokerDLQ the setup check, on
// Kafka; TestIntegrationShareKillMidway, on Kafka 4.4, two worker processes
// killed with SIGKILL mid-work, the group's broker dead-letter topic
// keeping what the broker archives, and every record accounted for.
//
// # Group protocols
//
// [Config.GroupProtocol] chooses the classic consumer-group protocol (the
// default) or KIP-848's consumer protocol ([GroupConsumer], Kafka 4.0+), where
// the broker assigns partitions and rebalances are incremental.
//
// # Topics by pattern
//
// [Config.TopicPattern] reads every topic whose whole name matches a regular
// expression instead of a list: the cluster's topics are listed at the start
// and every [Config.TopicRefresh], and a new match joins the subscription
// (a rebalance). The consumer's own topics never match, though their names
// may: the dead-letter topic of a listed topic and the durable-attempts
// topic, so "orders.*" does not read orders.dlq back. A subscribed topic
// stays subscribed, even deleted: created again, it is read again. (On
// brokers before Kafka 4.2, which commit offsets by topic name, a commit of
// the deleted topic's offsets that lands after the new one exists is kept
// for the new one: stop the consumers before deleting a topic there.)
//
// # Settling failures
//
// A failure has a stage (deserialize key, deserialize value, process) and a
// class (transient, permanent, unclassified; see package failure). The
// [Policy] gives each stage and class an [Outcome]: retry in place under a
// backoff policy (the partition pauses and the worker sleeps: no hot loop),
// then an [Action]: [ActionDeadLetter], [ActionSkip] or [ActionHalt]. The defaults:
//
//   - a record that cannot be decoded (permanent, or unclassified) goes to the
//     dead-letter topic at once;
//   - a transient decode failure (a schema-registry outage) is retried until
//     it succeeds, with capped exponential backoff: nothing is dead-lettered
//     while a dependency is down;
//   - a processing failure is retried a few times with exponential backoff,
//     then dead-lettered; a permanent one is dead-lettered at once.
//
// To hand the handler a substitute value instead of failing at decode time,
// wrap the deserializer with serde.Fallback. A panic in a deserializer or in
// the handler is a permanent failure of its stage, never a crash.
//
// The consumer's policy already retries and dead-letters decode failures, so
// give it the bare deserializer; use serde.Retry only for a retry the policy
// cannot express (a few quick tries inside one decode), and serde.Handle only
// when the handler itself must see the failure as a value: a Handle-wrapped
// deserializer never fails, so its failures reach the dead-letter topic as
// process-stage failures, if at all.
//
// The attempt count of a record retried in place survives restarts and
// rebalances ([DurableAttempts]): a record that failed 9 of its 10 tries
// before a crash gets one more try after it, not ten.
//
// A failure that carries a failure.RetryAfter hint (an HTTP Retry-After, a
// circuit breaker's next probe) waits exactly the hint instead of the policy's
// backoff: the dependency knows when a try is worth it. The policy still
// decides when to stop.
//
// # Retry topics
//
// Retrying in place holds a partition while one record waits. An [Rule]
// with Then: [ActionRetryTopic] forwards the record to delay tiers instead
// ([RetryTopics]: "orders.retry.1s", "orders.retry.30s", ... then the
// dead-letter topic) and the partition moves on. It combines with retrying
// in place: Rule{Retry: backoff.MaxAttempts(b, 2), Then: ActionRetryTopic} is
// two quick tries here, then one try per tier. The consumer reads the tiers
// in the same group; a tier partition whose head record is not due yet has its
// fetching paused until it is. The attempt count and the first failure time
// travel in the record's headers, so they survive restarts and rebalances.
//
// Unlike Spring Kafka's retry topics, per-key order is kept (unless
// RetryTopics.Unordered): while a key has a record in the tiers, later records
// of that key are parked behind it and processed in source order once it is
// settled; other keys are not delayed. A parked record is written to the tiers
// once: a tier partition that reads it while its key is still held up keeps it
// in memory until then (not with ExactlyOnce). Records without a key are not ordered.
// See [RetryTopics] for how the parked keys are rebuilt after a restart and
// what bounds them. After a crash, a copy in a tier whose commit had not
// passed it may be read and tried again (at-least-once): a record can then be
// tried once more with the attempt count of that copy.
//
// # Dead letters
//
// A dead letter is the original key, value and headers, byte for byte, plus
// the failure headers of package deadletter (stage, class, error type and
// message, original coordinates, group, attempts, failure times). The write
// is acknowledged before the offset moves on; if it fails it is retried with
// backoff ([DeadLetterConfig.Retry]) while the partition waits, so no record
// is ever lost and no offset passes it. The topic name comes from
// [DeadLetterConfig.Topic] ("{topic}.dlq" by default); a dead letter goes to
// its source partition when the dead-letter topic has at least as many
// partitions as the source, otherwise by key.
//
// Dead-letter topics are checked when partitions are assigned, before any
// record depends on them: a missing one is created (source partition count,
// broker default replication, max.message.bytes of the source topic plus
// [LetterHeadroom]) unless [DeadLetterConfig.DisableTopicCreation] is set, and
// one that cannot be used is logged and shown in [Stats.DeadLetterTopics].
// Dead-letter produces are sized for the dead-letter topic, so a record near
// its topic's size limit still fits; a letter that does not fit loses its
// error message first. A write that can never succeed (too large, not
// authorized, a policy violation) shows the partition as stuck at once, and
// [DeadLetterConfig.Unwritable] decides: wait (the default), halt or skip.
//
// # Commits
//
// Settled records are marked for commit in small batches, and always before
// the partition waits for anything (a retry, a dead letter, new records);
// marked offsets are committed every [Config.CommitInterval], when
// partitions are revoked, and on shutdown. In-flight work on a revoked
// partition is abandoned without being committed, so a crash or a rebalance
// may redeliver unsettled records (at-least-once), and a crash also the few
// settled records of an unmarked batch, but no record is ever lost. In the
// exactly-once mode ([ExactlyOnce]) offsets are committed only in the
// transactions, with the writes of the records they settle: the handler may
// still run again for a record after a crash, but what it wrote through
// [Record.Produce] is seen once by read_committed readers.
//
// # Operating it
//
//   - Kill switch: the environment variable ANTIDOTE_RETRY_DISABLED=true
//     ([EnvRetryDisabled]) at start, or [Consumer.SetRetryEnabled] at runtime,
//     turns retrying off: transient failures go straight to their exhausted
//     outcome, with reason "retry-disabled".
//   - [Consumer.Skip] settles the record a partition is stuck on, named by
//     its offset, as skipped and moves past it; it refuses when the partition
//     is stuck elsewhere, so an operator never skips a record they did not see.
//   - [Consumer.DeadLetter] sends the record a partition is stuck on,
//     retrying, to its dead-letter topic instead (reason operator, and who
//     asked), to be redriven later.
//   - [Consumer.Stats] returns counters (consumed, processed, retried,
//     dead-lettered, skipped, by stage and class), the stuck partitions (why,
//     since when, attempts, last error), what is buffered, the dead-letter
//     topics and whether the brokers answer. It marshals to JSON.
//   - Logs go to [Config.Logger] (log/slog), with franz-go's own warnings;
//     every record-level line carries topic, partition, offset and timestamp,
//     classes and durations are text, and record-level lines are rate-limited
//     per partition with a line that counts what was suppressed. A cluster
//     that does not answer is a warning within seconds.
//   - [Consumer.Close] stops the consumer and waits for Run; from a handler
//     (code Run waits for), call [Consumer.Stop], which returns at once.
//   - [Consumer.Pause] and [Consumer.Resume] stop and restart one partition.
//   - The flood guard ([FloodGuard], on by default) pauses the consumer when
//     more than half of a partition's last 1000 records would be
//     dead-lettered (a bad deploy, a wrong schema) instead of emptying the
//     topic into the dead-letter topic; [Consumer.ResumeFlood] goes on.
//   - [Hooks] receives every event that metrics need (package metrics/prom).
//   - [Tracer] traces each record through its tries, retry tiers and dead
//     letter (package trace/otel, OpenTelemetry); without one, nothing is
//     paid.
package consumer
