package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// EnvRetryDisabled is the kill switch read by [New]: "1" or "true" starts
// the consumer with retrying turned off, "0", "false" or unset leaves it on.
// Any other value is a configuration error. [Consumer.SetRetryEnabled] flips it
// at runtime.
const EnvRetryDisabled = "ANTIDOTE_RETRY_DISABLED"

// Handler processes one decoded record. It is called from one goroutine per
// partition, in offset order; handlers of different partitions run
// concurrently. ctx is canceled when the partition is revoked, the consumer
// stops, or an operator skips the record; a handler that returns after ctx is
// done leaves the record unsettled (it is redelivered, never dead-lettered).
//
// Return nil when done. An error is a process-stage failure settled by the
// [Policy]: mark it with failure.Permanent to dead-letter at once, or
// failure.Transient to retry. A panic is a permanent failure.
type Handler[K, V any] func(ctx context.Context, r *Record[K, V]) error

// Record is a decoded record handed to a [Handler].
type Record[K, V any] struct {
	Key   K
	Value V
	// Raw is the record as fetched. A record read from a retry tier (see
	// [RetryTopics]) is shown as its original: the source topic,
	// partition, offset, timestamp and headers. Its byte slices must not
	// be modified.
	Raw *kgo.Record
	// Attempt is 1 on the first try and grows with each retry, in place
	// or in the retry tiers.
	Attempt int
	// FirstFailure is the time of the first failure, zero on the first try.
	FirstFailure time.Time
	// Tier is the number of retry tiers the record went through after
	// failing: 0 for a record that was not forwarded.
	Tier int

	txn bool          // the consumer is in the exactly-once mode
	out []*kgo.Record // outputs of the handler (Produce)
}

// Config configures a [Consumer]. The zero value of every optional field is a
// valid default.
type Config[K, V any] struct {
	// Brokers are the seed brokers. Required, unless ClientOpts has
	// kgo.SeedBrokers.
	Brokers []string
	// Topics to consume. Required, unless TopicPattern is set.
	Topics []string
	// TopicPattern subscribes to every topic whose whole name matches this
	// regular expression (RE2 syntax), including topics created while the
	// consumer runs: the cluster's topics are listed at the start and then
	// every TopicRefresh. Internal topics (__consumer_offsets) and the
	// consumer's own topics (the dead-letter topic of a listed topic, the
	// durable-attempts topic) never match, so "orders.*" does not read
	// orders.dlq back. A subscribed topic stays subscribed. Optional; set
	// it instead of Topics. Not with RetryTopics or ShareGroup.
	TopicPattern string
	// TopicRefresh is how often the topics of TopicPattern are listed
	// again: a new matching topic is read within about this long.
	// Optional: 30s.
	TopicRefresh time.Duration
	// Group is the consumer group. Required, unless ShareGroup is set.
	Group string
	// ShareGroup makes the consumer a member of this share group (KIP-932,
	// Kafka 4.2+) instead of a consumer group: records are acquired by
	// any member, not assigned by partition, and settled by
	// acknowledgement. Optional; set it instead of Group. See the package
	// documentation's "Share groups" and [Share].
	ShareGroup string
	// Share configures the share-group member. Optional: see [Share].
	Share Share
	// Key decodes record keys. Optional: nil leaves Record.Key at its zero
	// value and never fails.
	Key serde.Deserializer[K]
	// Value decodes record values. Required. Wrap it with serde.Fallback to
	// hand the handler a substitute value instead of failing.
	Value serde.Deserializer[V]
	// Handler processes records. Required, unless BatchHandler is set.
	Handler Handler[K, V]
	// BatchHandler processes records in batches instead of Handler, which
	// must then be nil. Optional. See [BatchHandler].
	BatchHandler BatchHandler[K, V]
	// Batching sizes the batches of BatchHandler. Optional: see [Batching].
	Batching Batching
	// Policy settles failures. Optional: see [Policy] for the defaults.
	Policy Policy
	// DeadLetter configures the dead-letter topic. Optional.
	DeadLetter DeadLetterConfig
	// RetryTopics configures the delay tiers of failures whose Outcome
	// says ActionRetryTopic. Optional: none.
	RetryTopics RetryTopics
	// Classifier classifies errors. Optional: failure.Default().
	Classifier failure.Classifier
	// ClientOpts are extra franz-go options: TLS, SASL, client id, fetch
	// sizes. Optional. The consumer owns the group, topic, commit and
	// partitioner options and overrides them.
	ClientOpts []kgo.Opt
	// CommitInterval is how often settled offsets are committed. Optional:
	// 5s. Offsets are also committed on revoke and on shutdown.
	CommitInterval time.Duration
	// Buffer bounds the records the consumer holds, per partition and in
	// total. Optional: see [BufferLimits] for the defaults.
	Buffer BufferLimits
	// Concurrency lets a partition handle several records at once, one
	// key at a time. Optional: one record at a time per partition.
	Concurrency Concurrency
	// ExactlyOnce writes the handler's outputs, the dead letters and the
	// commit of the offsets in Kafka transactions. Optional: off, see
	// [ExactlyOnce].
	ExactlyOnce ExactlyOnce
	// GroupProtocol chooses the consumer-group protocol. Optional:
	// [GroupClassic].
	GroupProtocol GroupProtocol
	// Logger receives structured logs; record-level lines carry topic,
	// partition, offset and timestamp, and are rate-limited per partition
	// (at most 20 lines per 10s, then one line that counts the rest).
	// franz-go's own log lines go here too, at warn level and above (set
	// kgo.WithLogger in ClientOpts to change that). Optional: slog.Default().
	Logger *slog.Logger
	// SkipIf chooses failures to skip, before any retry or dead letter: a
	// record for which it returns true is logged, counted as skipped and
	// passed. Optional. For example, a service that handles only some of
	// the record types of a shared Avro topic:
	//
	//	SkipIf: func(_ deadletter.Stage, err error) bool { return avro.IsUnknownType(err) },
	//
	// It is called from partition workers concurrently and must not block.
	SkipIf func(stage deadletter.Stage, err error) bool
	// DurableAttempts keeps the attempt count of a record retried in place
	// across restarts and rebalances. Optional: on, see [DurableAttempts].
	DurableAttempts DurableAttempts
	// FloodGuard pauses the consumer when it would dead-letter too much at
	// once. Optional: on, see [FloodGuard] for the defaults.
	FloodGuard FloodGuard
	// Hooks receives the consumer's events, for metrics (see package
	// metrics/prom) and alerting. Optional.
	Hooks Hooks
	// Tracer traces each record through its tries, retry tiers and dead
	// letter (see [Tracer]; package trace/otel implements it with
	// OpenTelemetry). Optional; default none, at no cost.
	Tracer Tracer
	// Dependencies report the state of the consumer's dependencies (a
	// schema registry's circuit breaker, say) by name, in
	// [Stats.Dependencies]. Optional. Each function must be cheap and
	// safe for concurrent use.
	Dependencies map[string]func() string
}

// DeadLetterConfig configures the dead-letter topic.
type DeadLetterConfig struct {
	// Topic names the dead-letter topic. Optional: "{topic}.dlq".
	Topic deadletter.Template
	// DisableTopicCreation turns off the creation of missing dead-letter
	// topics. Optional: off, so a missing dead-letter topic is created when
	// its source topic's partitions are assigned, with the source topic's
	// partition count, the broker's default replication and
	// max.message.bytes = the source topic's limit + [LetterHeadroom]. With
	// creation off, a missing topic is reported at assignment (a log line
	// and Stats.DeadLetterTopics) and a letter for it waits until it exists.
	DisableTopicCreation bool
	// Retry paces retries of a failed dead-letter write. Writes are retried
	// until they succeed; the partition waits meanwhile and its offset never
	// passes the record. Optional: exponential from 200ms, capped at 10s.
	Retry backoff.Policy
	// WriteTimeout bounds one write attempt. Optional: 10s.
	WriteTimeout time.Duration
	// Unwritable decides what happens to a letter whose write can never
	// succeed (too large for the dead-letter topic, not authorized, rejected
	// by a policy, an invalid topic): the partition shows as stuck at once,
	// with the error in Stats.Stuck, and then waits, halts or skips.
	// Optional: [UnwritableWait].
	Unwritable Unwritable
}

// Unwritable is what happens to a dead letter that can never be written.
type Unwritable uint8

const (
	// UnwritableWait retries the write with DeadLetterConfig.Retry until it
	// succeeds (the cause fixed: the topic's limit raised, an ACL granted)
	// or an operator skips the record: nothing is lost, and the stuck
	// partition is visible. The default.
	UnwritableWait Unwritable = iota
	// UnwritableHalt stops the consumer: Run returns a *HaltError naming the
	// record, and the offset does not move past it.
	UnwritableHalt
	// UnwritableSkip settles the record as skipped: logged with its topic,
	// partition, offset and timestamp, and counted in Stats.Skipped.
	UnwritableSkip
)

func (u Unwritable) String() string {
	switch u {
	case UnwritableWait:
		return "wait"
	case UnwritableHalt:
		return "halt"
	case UnwritableSkip:
		return "skip"
	}
	return "unwritable(" + strconv.Itoa(int(u)) + ")"
}

// BufferLimits bounds what the consumer holds: a record is held from its
// fetch until it is settled (queued, being handled, or dead-lettered with its
// letter not yet acknowledged). A record settled while an earlier dead letter
// is in flight is no longer held, though its offset is committed only after
// that letter is acknowledged; a partition waits for its oldest dead letter
// once 1024 are in flight. Each zero field takes its default.
//
// The default record bounds hold several fetches of small records, so that
// the next fetch is under way while the workers have work: a fetch brings a
// partition up to kgo.FetchMaxPartitionBytes (1 MiB by default), about 5,000
// records of 200 bytes. For records of more than about 840 bytes on average,
// the byte bounds are reached first.
//
// Backpressure throws fetched data away only to keep the other partitions
// busy. Each poll takes all the client has fetched (one fetch per broker;
// see kgo.FetchMaxBytes and kgo.FetchMaxPartitionBytes), so that every
// partition gets its part of every fetch at once. The consumer stops polling
// (franz-go keeps what it fetched meanwhile) while all flowing partitions
// together hold the total, until a quarter of it is free. A partition that
// holds its own bound has its fetching paused, while the others keep
// flowing, at the first poll where that drops nothing (franz-go drops what
// it holds for a paused partition); until then it takes its part of the
// fetches already under way. It flows again once back under half of its
// bound. When its records are the last of its broker's fetch, no poll drops
// nothing (a broker keeps the order of a fetch session's partitions while
// they all have data, so a partition last once stays last; one alone on its
// broker always is). The consumer then pauses another partition of that
// broker for one fetch, which takes it out of the broker's fetch session;
// resumed, it comes back last, after the full partition, which is then
// paused with nothing dropped. The full partition takes its part of up to
// three more fetches meanwhile, and the other misses one or two. When that
// cannot be done or fails (no other partition of the broker flows, the
// other had no records to return, another partition's rotation is under
// way, a partition moved to another broker, the full one was given four
// fetches without a pause, or 10 s passed), the
// consumer stops polling, leaving that last record in the client, until the
// partition is back under half of its bound or the member's other flowing
// partitions have no records left. In the second case it tries again if it
// could not start, or else pauses the partition, dropping that one record,
// whose batch is fetched again on resume. (With several brokers, a
// partition given two more fetches with no such poll is treated the same,
// and what its broker's fetch brought it meanwhile is dropped.) So a full
// partition slows the others only while they have work, and a partition
// that no other flowing partition waits for (the member's only one, or the
// others paused) never drops a record. A partition retrying a record (or paused
// by an operator) has its fetching paused too, and a partition paused while
// full, for any reason, stays paused until back under half of its bound. A
// paused partition keeps what it holds and counts toward neither bound, so
// stuck or full partitions do not hold the others back. A partition holds
// at most its own bound plus five fetches of it on one broker (two, and up
// to three more in a rotation; with several brokers, a poll round may bring
// it two, and six in all); what the consumer holds
// is at most the total plus one fetch per broker, plus what the paused
// partitions hold, plus up to Concurrency.AheadBytes (16 MiB by default) for
// each retry tier partition. A retry tier's partition with per-key order counts only
// the records its worker has not taken yet: what it has taken (handling,
// held behind their key, or settled behind a held one) is bounded by
// Concurrency.Ahead (at least 10,000 there) and AheadBytes instead, so that
// a held record never stops the fetching of the record it waits for (see
// [RetryTopics]).
type BufferLimits struct {
	// PartitionRecords bounds the records one partition holds. Optional:
	// 40000.
	PartitionRecords int
	// PartitionBytes bounds the bytes (keys, values and headers) one
	// partition holds. Optional: 32 MiB.
	PartitionBytes int64
	// TotalRecords bounds the records all flowing partitions hold together.
	// Optional: 80000.
	TotalRecords int
	// TotalBytes bounds the bytes all flowing partitions hold together.
	// Optional: 64 MiB.
	TotalBytes int64
}

func (b BufferLimits) withDefaults() BufferLimits {
	if b.PartitionRecords == 0 {
		b.PartitionRecords = 40000
	}
	if b.PartitionBytes == 0 {
		b.PartitionBytes = 32 << 20
	}
	if b.TotalRecords == 0 {
		b.TotalRecords = 80000
	}
	if b.TotalBytes == 0 {
		b.TotalBytes = 64 << 20
	}
	return b
}

func (b BufferLimits) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"PartitionRecords", int64(b.PartitionRecords)}, {"PartitionBytes", b.PartitionBytes}, {"TotalRecords", int64(b.TotalRecords)}, {"TotalBytes", b.TotalBytes}} {
		if f.v < 0 {
			return configErr("Buffer."+f.name, "negative")
		}
	}
	return nil
}

// GroupProtocol is a consumer-group protocol.
type GroupProtocol uint8

const (
	// GroupClassic is the classic protocol: the group leader assigns
	// partitions (cooperative-sticky), every broker version supports it.
	GroupClassic GroupProtocol = iota
	// GroupConsumer is the consumer protocol of KIP-848: the broker assigns
	// partitions and rebalances are incremental, with no stop-the-world
	// phase. It needs Kafka 4.0 or later (franz-go recommends 4.3+, where
	// commits during a rebalance cannot fail with STALE_MEMBER_EPOCH).
	GroupConsumer
)

func (g GroupProtocol) String() string {
	switch g {
	case GroupClassic:
		return "classic"
	case GroupConsumer:
		return "consumer"
	}
	return "protocol(" + strconv.Itoa(int(g)) + ")"
}

// Action is what happens to a failed record that is not, or no longer,
// retried.
type Action uint8

// Actions. The zero value is ActionDeadLetter, the default.
const (
	// ActionDeadLetter writes the record to the dead-letter topic, waits for the
	// acknowledgement, then moves the offset on.
	ActionDeadLetter Action = iota
	// ActionSkip logs and counts the record, then moves the offset on.
	ActionSkip
	// ActionHalt stops the consumer; Run returns a *HaltError naming the record.
	// The offset does not move past it.
	ActionHalt
	// ActionRetryTopic forwards the record to the next of [Config.RetryTopics]'
	// delay tiers and moves the offset on; after the last tier,
	// RetryTopics.Then. With a Retry policy, the record is first retried
	// in place: Rule{Retry: backoff.MaxAttempts(b, 2), Then: ActionRetryTopic}
	// is two quick tries here, then the tiers (Retry counts every try, so
	// in a tier it has none left and each tier gets one try).
	ActionRetryTopic
)

func (a Action) String() string {
	switch a {
	case ActionDeadLetter:
		return "dead-letter"
	case ActionSkip:
		return "skip"
	case ActionHalt:
		return "halt"
	case ActionRetryTopic:
		return "retry-topic"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Rule settles one kind of failure: retry in place under Retry (the
// partition is paused and the backoff sleeps), then, when Retry gives up or
// is nil-and-defaults-to-none, Then.
type Rule struct {
	// Retry paces retries in place. Optional: the slot's default (see
	// [Policy]); backoff.None() turns retrying off for the slot.
	Retry backoff.Policy
	// Then is what happens when retrying is over. Optional: ActionDeadLetter.
	Then Action
}

// StagePolicy holds the outcomes of one stage, by failure class.
type StagePolicy struct {
	Transient    Rule
	Permanent    Rule
	Unclassified Rule
}

// Policy settles failures by stage and class. Each zero field takes its
// default:
//
//	stage         class         retry                                          then
//	deserialize   permanent     none                                           dead letter
//	deserialize   transient     exponential 200ms x2, cap 30s, full jitter,   dead letter
//	                            forever (a schema-registry outage waits)
//	deserialize   unclassified  none (unreadable bytes are permanent)         dead letter
//	process       permanent     none                                           dead letter
//	process       transient     exponential 100ms x2, cap 5s, 4 tries         dead letter
//	process       unclassified  exponential 100ms x2, cap 5s, 4 tries         dead letter
//
// Key and value deserialization share the Deserialize policy.
type Policy struct {
	Deserialize StagePolicy
	Process     StagePolicy
}

// Defaults of the policy slots.
var (
	defaultDecodeTransient  = backoff.Exponential{Initial: 200 * time.Millisecond, Multiplier: 2, Max: 30 * time.Second, Jitter: backoff.JitterFull}
	defaultProcessRetry     = backoff.MaxAttempts(backoff.Exponential{Initial: 100 * time.Millisecond, Multiplier: 2, Max: 5 * time.Second, Jitter: backoff.JitterFull}, 4)
	defaultDeadLetterRetry  = backoff.Exponential{Initial: 200 * time.Millisecond, Multiplier: 2, Max: 10 * time.Second, Jitter: backoff.JitterEqual}
	defaultCommitInterval   = 5 * time.Second
	defaultDeadLetterTimout = 10 * time.Second
	defaultFetchMaxWait     = 500 * time.Millisecond
)

func (o Rule) withDefaults(retry backoff.Policy) Rule {
	if o.Retry == nil {
		o.Retry = retry
	}
	return o
}

// resolved is a Policy with every slot filled, indexed [stage][class].
type resolved [2][3]Rule

func (p Policy) resolve() resolved {
	var r resolved
	d, pr := p.Deserialize, p.Process
	r[0][failure.ClassTransient] = d.Transient.withDefaults(defaultDecodeTransient)
	r[0][failure.ClassPermanent] = d.Permanent.withDefaults(backoff.None())
	r[0][failure.ClassUnclassified] = d.Unclassified.withDefaults(backoff.None())
	r[1][failure.ClassTransient] = pr.Transient.withDefaults(defaultProcessRetry)
	r[1][failure.ClassPermanent] = pr.Permanent.withDefaults(backoff.None())
	r[1][failure.ClassUnclassified] = pr.Unclassified.withDefaults(defaultProcessRetry)
	return r
}

func (r *resolved) outcome(stage deadletter.Stage, c failure.Class) Rule {
	i := 0
	if stage == deadletter.StageProcess {
		i = 1
	}
	if int(c) > 2 {
		c = failure.ClassUnclassified
	}
	return r[i][c]
}

// usesRetryTopic reports whether a slot forwards to the retry tiers.
func (p Policy) usesRetryTopic() bool {
	for _, o := range []Rule{p.Deserialize.Transient, p.Deserialize.Permanent, p.Deserialize.Unclassified,
		p.Process.Transient, p.Process.Permanent, p.Process.Unclassified} {
		if o.Then == ActionRetryTopic {
			return true
		}
	}
	return false
}

func (p Policy) validate() error {
	slots := []struct {
		name string
		o    Rule
	}{
		{"Deserialize.Transient", p.Deserialize.Transient}, {"Deserialize.Permanent", p.Deserialize.Permanent},
		{"Deserialize.Unclassified", p.Deserialize.Unclassified}, {"Process.Transient", p.Process.Transient},
		{"Process.Permanent", p.Process.Permanent}, {"Process.Unclassified", p.Process.Unclassified},
	}
	for _, s := range slots {
		if s.o.Then > ActionRetryTopic {
			return configErr("Policy."+s.name+".Then", fmt.Sprintf("unknown action %d", s.o.Then))
		}
		if s.o.Retry != nil { // nil: the slot's default
			if err := checkRetry(s.o.Retry); err != nil {
				return configErr("Policy."+s.name+".Retry", err.Error())
			}
		}
	}
	return nil
}

func (c *Config[K, V]) validate() error {
	if len(c.Brokers) == 0 && len(c.ClientOpts) == 0 {
		return configErr("Brokers", "required: no seed brokers")
	}
	for _, b := range c.Brokers {
		if err := checkBroker(b); err != nil {
			return configErr("Brokers", err.Error())
		}
	}
	switch {
	case c.TopicPattern != "" && len(c.Topics) > 0:
		return configErr("TopicPattern", "set with Topics: choose one")
	case c.TopicPattern != "":
		if _, err := compileTopicPattern(c.TopicPattern); err != nil {
			return configErr("TopicPattern", err.Error())
		}
		if c.RetryTopics.on() {
			return configErr("TopicPattern", "does not work with RetryTopics yet: the tiers are made for named topics; name them in Topics")
		}
		if c.ShareGroup != "" {
			return configErr("TopicPattern", "does not work with ShareGroup: name the topics in Topics")
		}
	case len(c.Topics) == 0:
		return configErr("Topics", "required: no topics (or a TopicPattern)")
	}
	if c.TopicRefresh < 0 || (c.TopicRefresh > 0 && c.TopicRefresh < 100*time.Millisecond) {
		return configErr("TopicRefresh", "at least 100ms")
	}
	for _, t := range c.Topics {
		if t == "" {
			return configErr("Topics", "empty topic name")
		}
	}
	if c.Group == "" {
		return configErr("Group", "required")
	}
	if c.Value == nil {
		return configErr("Value", "required: a value deserializer (serde.Bytes() reads raw bytes)")
	}
	switch {
	case c.Handler == nil && c.BatchHandler == nil:
		return configErr("Handler", "required (or BatchHandler)")
	case c.Handler != nil && c.BatchHandler != nil:
		return configErr("BatchHandler", "set with Handler: choose one")
	}
	if err := c.Batching.validate(); err != nil {
		return err
	}
	if c.CommitInterval < 0 || (c.CommitInterval > 0 && c.CommitInterval < 100*time.Millisecond) {
		return configErr("CommitInterval", fmt.Sprintf("%v: must be at least 100ms", c.CommitInterval))
	}
	if err := c.Buffer.validate(); err != nil {
		return err
	}
	if err := c.FloodGuard.validate(); err != nil {
		return err
	}
	if err := c.RetryTopics.validate(); err != nil {
		return err
	}
	if err := c.Concurrency.validate(); err != nil {
		return err
	}
	if err := c.validateExactlyOnce(); err != nil {
		return err
	}
	if c.RetryTopics.on() != c.Policy.usesRetryTopic() {
		if c.RetryTopics.on() {
			return configErr("RetryTopics.Tiers", "set, but no Policy outcome has Then: ActionRetryTopic")
		}
		return configErr("Policy", "an outcome has Then: ActionRetryTopic, but RetryTopics.Tiers is empty")
	}
	if strings.Contains(string(c.DurableAttempts.Topic), "{topic}") {
		return configErr("DurableAttempts.Topic", "one topic serves every source topic: use {group}, not {topic}")
	}
	if err := c.DurableAttempts.Topic.Validate(); err != nil {
		return configErr("DurableAttempts.Topic", err.Error())
	}
	if c.GroupProtocol > GroupConsumer {
		return configErr("GroupProtocol", fmt.Sprintf("unknown protocol %d", c.GroupProtocol))
	}
	if c.DeadLetter.Unwritable > UnwritableSkip {
		return configErr("DeadLetter.Unwritable", fmt.Sprintf("unknown choice %d", c.DeadLetter.Unwritable))
	}
	if c.DeadLetter.WriteTimeout < 0 {
		return configErr("DeadLetter.WriteTimeout", "negative")
	}
	if err := c.DeadLetter.Topic.Validate(); err != nil {
		return configErr("DeadLetter.Topic", err.Error())
	}
	if c.DeadLetter.Retry != nil {
		if err := checkRetry(c.DeadLetter.Retry); err != nil {
			return configErr("DeadLetter.Retry", err.Error())
		}
	}
	return c.Policy.validate()
}

// checkBroker checks one seed broker address: host, or host:port with a
// port number.
func checkBroker(b string) error {
	if strings.TrimSpace(b) == "" {
		return fmt.Errorf("empty broker address")
	}
	if !strings.Contains(b, ":") {
		return nil // franz-go adds the default port 9092
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", b, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", b)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", b, port)
	}
	return nil
}

// spinProbe is how many attempts checkRetry asks a policy about.
const spinProbe = 1000

// checkRetry validates a retry policy and rejects one that would spin: a
// policy that never waits and does not stop within spinProbe attempts (such
// as backoff.Fixed(0)) would turn a failing record into a hot loop.
func checkRetry(p backoff.Policy) error {
	if err := backoff.Validate(p); err != nil {
		return err
	}
	for attempt := 1; attempt <= spinProbe; attempt++ {
		w, ok := p.Next(attempt, 0)
		if !ok || w > 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: the policy never waits and does not stop within %d attempts: it would spin; give it a wait (backoff.Fixed(100*time.Millisecond)) or an attempt limit (backoff.MaxAttempts)", backoff.ErrInvalid, spinProbe)
}

// retryDisabledFromEnv reads the kill switch.
func retryDisabledFromEnv() (bool, error) {
	v, ok := os.LookupEnv(EnvRetryDisabled)
	if !ok {
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, configErr(EnvRetryDisabled, fmt.Sprintf("%q is not a boolean (use 1/true to turn retrying off, 0/false to keep it on)", v))
}

// commonDefaults fills the defaults every source shares: the dead-letter
// writer's retry and timeout, the logger and the classifier.
func (cfg *Config[K, V]) commonDefaults() {
	if cfg.DeadLetter.Retry == nil {
		cfg.DeadLetter.Retry = defaultDeadLetterRetry
	}
	if cfg.DeadLetter.WriteTimeout == 0 {
		cfg.DeadLetter.WriteTimeout = defaultDeadLetterTimout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Classifier == nil {
		cfg.Classifier = failure.Default()
	}
}
