package deadletter

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Provenance headers that [Redrive] appends to every record it
// re-produces.
const (
	// HeaderRedriveCount: how many times the record has been redriven,
	// decimal. It counts up from the value found among the original
	// headers, so that a record that keeps failing is refused after
	// [RedriveConfig.MaxRedrives] rounds.
	HeaderRedriveCount = "antidote.redrive.count"
	// HeaderRedriveFrom: the dead letter the record was redriven from, as
	// "topic/partition/offset".
	HeaderRedriveFrom = "antidote.redrive.from"
	// HeaderRedriveTrace: the trace context of the span that wrote the
	// dead letter (its [HeaderTraceLetter]), when the letter has one: a
	// tracer (package trace/otel) links the redriven record's span to it.
	HeaderRedriveTrace = "antidote.redrive.trace"
)

// HeaderTraceLetter is the header a traced consumer appends to a letter it
// writes (a dead letter, or a copy forwarded to a retry tier) after the
// failure headers: the trace context of the span that wrote it, as a W3C
// traceparent ("00-<trace id>-<span id>-<flags>"). The letter keeps the
// original record's own trace headers (traceparent, tracestate) among its
// original headers.
const HeaderTraceLetter = "antidote.trace.letter"

// DefaultMaxRedrives is the default of [RedriveConfig.MaxRedrives].
const DefaultMaxRedrives = 3

// DefaultProduceTimeout is the default of [RedriveConfig.ProduceTimeout].
const DefaultProduceTimeout = 30 * time.Second

// Defaults of [RedriveConfig.BatchRecords] and [RedriveConfig.BatchTime].
const (
	DefaultBatchRecords = 1000
	DefaultBatchTime    = time.Second
)

// RedriveConfig says what [Redrive] does. The zero value of every optional
// field is a valid default.
type RedriveConfig struct {
	// Topic is the dead-letter topic to redrive. Required.
	Topic string
	// To is the topic every letter goes to. Optional; default: each
	// letter's original topic.
	To string
	// Filter selects the letters to redrive. Optional; default all.
	// Letters it does not select are skipped, and counted. Relative
	// bounds (MaxAge, MinAge) are resolved once, when Redrive starts.
	Filter Filter
	// Letters limits the redrive to the letters at these positions of
	// Topic (picked one by one): only their partitions, from the first
	// to the last of them, are read, and the letters between them are
	// skipped. Filter still applies. Optional; default every letter.
	Letters []Position
	// Group is the consumer group under which progress is committed on
	// Topic, so that an interrupted redrive resumes where it stopped.
	// Optional; default [RedriveConfig.DefaultGroup].
	Group string
	// MaxRedrives refuses a letter whose original record was already
	// redriven this many times. Optional; default [DefaultMaxRedrives];
	// negative: no limit.
	MaxRedrives int
	// Partitioning chooses the partition of each redriven record.
	// Optional; default [PartitionOriginal]: the letter's original
	// partition when the target topic has it, else by key. It needs a
	// client made with [ScanOpts].
	Partitioning Partitioning
	// DryRun reads and decides, but neither produces nor commits.
	DryRun bool
	// ExactlyOnce produces each batch of records and commits its
	// progress in one Kafka transaction: a crash at any point repeats no
	// record and skips none (readers with read_committed isolation see
	// every redriven record once). cl must be made with [RedriveTxnOpts].
	// Without it, progress is committed after each batch is acknowledged,
	// and a crash repeats at most the unacknowledged batch.
	ExactlyOnce bool
	// BatchRecords and BatchTime bound a batch: its records are produced
	// without waiting for each other (pipelined), then acknowledged and
	// committed together (in one transaction with ExactlyOnce). A batch
	// ends after BatchRecords letters read or BatchTime, whichever comes
	// first. Optional; defaults [DefaultBatchRecords], [DefaultBatchTime].
	BatchRecords int
	BatchTime    time.Duration
	// Rate bounds the redrive to this many records per second. Optional;
	// default unbounded.
	Rate float64
	// Limit stops the redrive after this many records were redriven.
	// Optional; default no limit.
	Limit int
	// ProduceTimeout bounds the wait for a batch's acknowledgements and
	// its commit. Optional; default [DefaultProduceTimeout].
	ProduceTimeout time.Duration
	// IdleTimeout is [ScanConfig.IdleTimeout].
	IdleTimeout time.Duration
	// Progress, when set, is called after every letter read, from the
	// goroutine that called Redrive, with the result so far. Its Targets
	// and Refusals are the redrive's own, which it goes on changing: copy
	// them to keep them past the call.
	Progress func(RedriveResult)
}

// DefaultGroup returns the group used when Group is empty:
// "antidote-redrive-<topic>", followed by a hash of the target, the
// filter's [Filter.Canonical] text, the picked letters and a MaxRedrives
// other than the default, when any is set. The same command line run again
// resumes its own progress, also with a relative filter ("--since 7d"),
// and a redrive with another selection or limit keeps separate progress
// rather than passing over the letters the first one skipped or refused
// (which a purge of its letters would then take for redriven).
func (c *RedriveConfig) DefaultGroup() string {
	g := "antidote-redrive-" + c.Topic
	limit := c.MaxRedrives != 0 && c.MaxRedrives != DefaultMaxRedrives
	if c.To == "" && c.Filter.IsZero() && len(c.Letters) == 0 && !limit {
		return g
	}
	text := fmt.Appendf(nil, "to=%q %s", c.To, c.Filter.Canonical())
	if limit {
		text = fmt.Appendf(text, " max-redrives=%d", c.MaxRedrives)
	}
	if len(c.Letters) > 0 {
		ps := slices.Clone(c.Letters)
		slices.SortFunc(ps, Position.compare)
		text = append(text, " letters="...)
		for _, p := range slices.Compact(ps) {
			text = fmt.Appendf(text, "%d:%d,", p.Partition, p.Offset)
		}
	}
	sum := sha256.Sum256(text)
	return g + "-" + hex.EncodeToString(sum[:4])
}

// Position is the place of one record in a topic.
type Position struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

func (p Position) compare(q Position) int {
	if c := cmp.Compare(p.Partition, q.Partition); c != 0 {
		return c
	}
	return cmp.Compare(p.Offset, q.Offset)
}

// RedriveTransactionalID is the transactional id of an exactly-once
// redrive that commits its progress in group: one per group, so that a
// restarted redrive fences the one it replaces and aborts its open
// transaction.
func RedriveTransactionalID(group string) string { return group }

// RedriveTxnOpts are the options of the client of an exactly-once redrive
// ([RedriveConfig.ExactlyOnce]) whose progress is in group (the
// configuration's Group, or its DefaultGroup): its transactional id, and
// the classic transaction protocol (AddOffsetsToTxn, which a groupless
// transactional commit needs; KIP-890 part 2 versions are left out).
func RedriveTxnOpts(group string) []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionalID(RedriveTransactionalID(group)),
		kgo.TransactionTimeout(time.Minute),
		kgo.MaxVersions(kversion.V3_9_0()),
	}
}

// Validate reports whether c is usable.
func (c *RedriveConfig) Validate() error {
	switch {
	case c.Topic == "":
		return errors.New("deadletter: redrive: Topic is required")
	case c.To != "" && (!legalTopic.MatchString(c.To) || c.To == "." || c.To == ".."):
		return fmt.Errorf("deadletter: redrive: To %q is not a legal topic name", c.To)
	case c.To == c.Topic:
		return fmt.Errorf("deadletter: redrive: To %q is the dead-letter topic itself", c.To)
	case c.Rate < 0:
		return fmt.Errorf("deadletter: redrive: Rate %v is negative", c.Rate)
	case c.Limit < 0:
		return fmt.Errorf("deadletter: redrive: Limit %d is negative", c.Limit)
	case c.BatchRecords < 0:
		return fmt.Errorf("deadletter: redrive: BatchRecords %d is negative", c.BatchRecords)
	}
	if err := c.Partitioning.validate(); err != nil {
		return fmt.Errorf("deadletter: redrive: %w", err)
	}
	for _, p := range c.Letters {
		if p.Partition < 0 || p.Offset < 0 {
			return fmt.Errorf("deadletter: redrive: letter %d:%d is not a position", p.Partition, p.Offset)
		}
	}
	return nil
}

// RedriveResult counts what [Redrive] did.
type RedriveResult struct {
	Group string // the consumer group holding the progress
	// Scanned counts the letters read in this run (after the committed
	// progress).
	Scanned int
	// Redriven counts the letters re-produced and committed (in a dry
	// run: that would be).
	Redriven int
	// Refused counts the letters that cannot be redriven: past
	// MaxRedrives, malformed, no known original topic. Refusals lists
	// the first hundred of them.
	Refused  int
	Refusals []Refusal
	// Skipped counts the letters the filter did not select.
	Skipped int
	// Targets counts the redriven letters per target topic.
	Targets map[string]int
	// Remaining is how many records were left to read when the redrive
	// started (an upper bound for Scanned), for progress displays.
	Remaining int64
	// DryRun and ExactlyOnce are copied from the configuration.
	DryRun, ExactlyOnce bool
}

// Refusal is one letter [Redrive] refused, and why.
type Refusal struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
}

const maxRefusals = 100

// Redrive re-produces the original record of every selected dead letter
// of cfg.Topic to its original topic (or cfg.To): the key, the value and
// the original headers byte for byte, followed by the provenance headers
// [HeaderRedriveCount] and [HeaderRedriveFrom], and [HeaderRedriveTrace]
// for a letter written by a traced consumer (an older redrive's provenance
// headers among the original ones are replaced).
//
// Each target topic is checked before the first record goes to it: a
// missing one ends the redrive with an [*UnknownTargetError] and nothing
// produced to it. Records are produced in pipelined batches (see
// [RedriveConfig.BatchRecords]); progress is committed as the offsets of
// cfg.Group on cfg.Topic once a batch is acknowledged, and Redrive starts
// from the committed offsets. When ctx ends, Redrive finishes the batch
// in flight, commits, and returns the result so far with ctx's error: run
// again, it neither repeats nor skips a record. A crash between a batch's
// acknowledgement and its commit repeats that batch, unless
// cfg.ExactlyOnce, where it repeats nothing. Only one redrive may use a
// group at a time.
//
// Redrive reads and produces with cl, which must not be a group consumer
// (create it with [ScanOpts], and with [RedriveTxnOpts] for ExactlyOnce).
// It reads up to the end offsets it finds when it starts.
func Redrive(ctx context.Context, cl *kgo.Client, cfg RedriveConfig) (RedriveResult, error) {
	if err := cfg.Validate(); err != nil {
		return RedriveResult{}, err
	}
	if cfg.Group == "" {
		cfg.Group = cfg.DefaultGroup()
	}
	if cfg.MaxRedrives == 0 {
		cfg.MaxRedrives = DefaultMaxRedrives
	}
	if cfg.ProduceTimeout <= 0 {
		cfg.ProduceTimeout = DefaultProduceTimeout
	}
	if cfg.BatchRecords == 0 {
		cfg.BatchRecords = DefaultBatchRecords
	}
	if cfg.BatchTime <= 0 {
		cfg.BatchTime = DefaultBatchTime
	}
	cfg.Filter = cfg.Filter.At(time.Now())
	res := RedriveResult{Group: cfg.Group, Targets: map[string]int{}, DryRun: cfg.DryRun, ExactlyOnce: cfg.ExactlyOnce}
	if cfg.ExactlyOnce && !cfg.DryRun {
		if err := checkTxnClient(cl, cfg.Group); err != nil {
			return res, err
		}
		// Initializing the producer id fences an earlier redrive of the
		// same group and aborts its open transaction, before the
		// progress is read.
		if _, _, err := cl.ProducerID(ctx); err != nil {
			return res, fmt.Errorf("deadletter: redrive: initializing the transactional producer %s: %w", RedriveTransactionalID(cfg.Group), err)
		}
	}
	adm := kadm.NewClient(cl)

	starts, ends, err := Bounds(ctx, cl, cfg.Topic)
	if err != nil {
		return res, err
	}
	if cfg.Partitioning != PartitionMurmur2 && !cfg.DryRun && !keepsPartitions(cl) {
		return res, errors.New("deadletter: redrive: the client cannot keep a letter's original partition: make it with deadletter.ScanOpts() (or set Partitioning to murmur2)")
	}
	committed, err := fetchProgress(ctx, cl, cfg.Group, cfg.Topic)
	if err != nil {
		return res, fmt.Errorf("deadletter: redrive: progress of group %s: %w", cfg.Group, err)
	}
	from := map[int32]int64{}
	var only map[Position]bool // cfg.Letters
	var parts []int32
	if len(cfg.Letters) > 0 {
		only = map[Position]bool{}
		for _, l := range cfg.Letters {
			only[l] = true
			if _, ok := ends[l.Partition]; !ok {
				return res, fmt.Errorf("deadletter: redrive: topic %q has no partition %d (it has %d)", cfg.Topic, l.Partition, len(ends))
			}
			if o, ok := from[l.Partition]; !ok || l.Offset < o {
				from[l.Partition] = l.Offset
			}
		}
		for p, first := range from {
			parts = append(parts, p)
			last := first
			for l := range only {
				if l.Partition == p && l.Offset > last {
					last = l.Offset
				}
			}
			if last+1 < ends[p] {
				ends[p] = last + 1
			}
		}
	}
	for p, end := range ends {
		if only != nil && !slices.Contains(parts, p) {
			continue
		}
		at := max(starts[p], from[p])
		if o, ok := committed[p]; ok && o > at {
			at = o
		}
		from[p] = at
		if end > at {
			res.Remaining += end - at
		}
	}

	r := &redriver{ctx: ctx, cfg: cfg, cl: cl, adm: adm, res: &res, only: only, dirty: map[int32]int64{}, checked: map[string]bool{}}
	if cfg.Rate > 0 {
		r.interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	if cfg.To != "" && !cfg.DryRun {
		if err := r.checkTarget(cfg.To); err != nil {
			return res, err
		}
	}
	err = Scan(ctx, cl, ScanConfig{Topic: cfg.Topic, Partitions: parts, From: from, To: ends, IdleTimeout: cfg.IdleTimeout}, r.record)
	if ferr := r.flush(); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return res, err
}

// UnknownTargetError is returned by [Redrive] when a topic it would
// produce to does not exist. Nothing was produced to it; the letters
// before are redriven and committed.
type UnknownTargetError struct {
	Topic string
	// Letter is the dead letter that was to go there, as
	// "topic/partition/offset".
	Letter string
}

func (e *UnknownTargetError) Error() string {
	if e.Letter == "" {
		return fmt.Sprintf("deadletter: redrive: target topic %q does not exist", e.Topic)
	}
	return fmt.Sprintf("deadletter: redrive: target topic %q does not exist (for the letter %s)", e.Topic, e.Letter)
}

// checkTxnClient refuses a client that cannot run an exactly-once
// redrive.
func checkTxnClient(cl *kgo.Client, group string) error {
	id, _ := cl.OptValue(kgo.TransactionalID).(string)
	mv, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
	if id == "" || mv == nil {
		return fmt.Errorf("deadletter: redrive: ExactlyOnce needs a transactional client: create it with RedriveTxnOpts(%q)", group)
	}
	if v, ok := mv.LookupMaxKeyVersion(int16(kmsg.Produce)); !ok || v >= 12 {
		return errors.New("deadletter: redrive: ExactlyOnce needs the classic transaction protocol: create the client with RedriveTxnOpts")
	}
	return nil
}

// fetchProgress reads the committed offsets of group on topic, waiting
// for offsets that an open transaction holds (RequireStable).
func fetchProgress(ctx context.Context, cl *kgo.Client, group, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	for {
		committed, err := adm.FetchOffsetsForTopics(kadm.RequireStable(ctx), group, topic)
		if err == nil {
			err = committed.Error()
		}
		switch {
		case errors.Is(err, kerr.GroupIDNotFound):
			// A group that never committed: no progress yet.
			return map[int32]int64{}, nil
		case errors.Is(err, kerr.UnstableOffsetCommit) || kerr.IsRetriable(err):
			// The transaction of a fenced redrive is being resolved,
			// or the coordinator is moving or starting.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		case err != nil:
			return nil, err
		}
		out := map[int32]int64{}
		for p, o := range committed[topic] {
			if o.At >= 0 {
				out[p] = o.At
			}
		}
		return out, nil
	}
}

type redriver struct {
	ctx      context.Context
	cfg      RedriveConfig
	cl       *kgo.Client
	adm      *kadm.Client
	res      *RedriveResult
	interval time.Duration
	next     time.Time
	checked  map[string]bool   // target topics known to exist
	only     map[Position]bool // cfg.Letters, nil for all

	// The batch in flight.
	dirty    map[int32]int64 // partition -> next offset, not yet committed
	inTxn    bool
	began    time.Time
	read     int                // letters read in this batch
	pending  []pendingRedrive   // produced, not yet committed
	mu       sync.Mutex         // guards failed
	failed   map[int32]failedAt // partition -> first failed produce
	produced sync.WaitGroup
}

type pendingRedrive struct {
	target string
}

type failedAt struct {
	offset int64
	err    error
}

func (r *redriver) refuse(rec *kgo.Record, why string) {
	r.res.Refused++
	if len(r.res.Refusals) < maxRefusals {
		r.res.Refusals = append(r.res.Refusals, Refusal{Partition: rec.Partition, Offset: rec.Offset, Reason: why})
	}
}

// record handles one dead letter.
func (r *redriver) record(rec *kgo.Record) error {
	if r.read == 0 {
		r.began = time.Now()
	}
	r.read++
	if err := r.decide(rec); err != nil {
		return err
	}
	if !r.cfg.DryRun {
		r.dirty[rec.Partition] = rec.Offset + 1
	}
	if r.read >= r.cfg.BatchRecords || time.Since(r.began) >= r.cfg.BatchTime {
		if err := r.flush(); err != nil {
			return err
		}
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress(*r.res)
	}
	if r.cfg.Limit > 0 && r.res.Redriven+len(r.pending) >= r.cfg.Limit {
		return ErrStop
	}
	return nil
}

// NotSelected is the reason [RedriveConfig.Decide] gives for a letter
// its filter does not select: a redrive skips it.
const NotSelected = "not selected by the filter"

// Decide says what a redrive of c does with the dead letter rec, without
// producing anything: it redrives it to target (why is empty), skips it
// (why is [NotSelected]) or refuses it (why is the refusal a redrive
// reports). c.Filter is applied as it is: resolve its relative bounds
// first ([Filter.At]). c.Letters is not consulted.
func (c *RedriveConfig) Decide(rec *kgo.Record) (target, why string) {
	_, target, why = c.judge(rec)
	return target, why
}

func (c *RedriveConfig) judge(rec *kgo.Record) (l *Letter, target, why string) {
	l, err := ParseRecord(rec)
	if !c.Filter.Selects(l) {
		return l, "", NotSelected
	}
	maxRedrives := c.MaxRedrives
	if maxRedrives == 0 {
		maxRedrives = DefaultMaxRedrives
	}
	switch {
	case errors.Is(err, ErrUnknownDialect):
		return l, "", "not a dead letter: no known failure headers"
	case err != nil:
		// Malformed headers: refuse rather than guess.
		return l, "", strings.ReplaceAll(err.Error(), "deadletter: ", "")
	case l.Dialect == DialectShareGroup && rec.Key == nil && rec.Value == nil:
		return l, "", "no copy of the record (share group without errors.deadletterqueue.copy.record.enable)"
	}
	target = c.To
	if target == "" {
		target = l.OriginalTopic
	}
	switch {
	case target == "":
		return l, "", "original topic unknown (use a target topic)"
	case target == c.Topic:
		return l, "", "original topic is the dead-letter topic itself"
	case !legalTopic.MatchString(target) || target == "." || target == "..":
		return l, "", fmt.Sprintf("original topic %q is not a legal topic name", Truncate(target, 64))
	case maxRedrives >= 0 && l.Redrives >= maxRedrives:
		return l, "", fmt.Sprintf("redriven %d times already (max %d)", l.Redrives, maxRedrives)
	}
	return l, target, ""
}

// decide redrives (produces), refuses or skips rec.
func (r *redriver) decide(rec *kgo.Record) error {
	r.res.Scanned++
	l, target, why := r.cfg.judge(rec)
	if r.only != nil && !r.only[Position{rec.Partition, rec.Offset}] {
		why = NotSelected
	}
	switch why {
	case "":
	case NotSelected:
		r.res.Skipped++
		return nil
	default:
		r.refuse(rec, why)
		return nil
	}
	if err := r.wait(r.ctx); err != nil {
		return err
	}
	if r.cfg.DryRun {
		r.res.Redriven++
		r.addTarget(target)
		return nil
	}
	if !r.checked[target] {
		// Everything read so far is settled first, so that the error
		// leaves nothing in flight.
		if err := r.flush(); err != nil {
			return err
		}
		if err := r.checkTarget(target); err != nil {
			var ute *UnknownTargetError
			if errors.As(err, &ute) {
				ute.Letter = RedriveFrom(rec.Topic, rec.Partition, rec.Offset)
			}
			return err
		}
	}
	if r.cfg.ExactlyOnce && !r.inTxn {
		if err := r.cl.BeginTransaction(); err != nil {
			return fmt.Errorf("deadletter: redrive: beginning a transaction: %w", err)
		}
		r.inTxn = true
	}
	out := &kgo.Record{Topic: target, Key: rec.Key, Value: rec.Value, Headers: redriveHeaders(l, rec)}
	// The produce is not cut short by ctx: once sent, its outcome is
	// waited for and committed.
	pctx := context.WithoutCancel(r.ctx)
	if r.cfg.Partitioning != PartitionMurmur2 && l.OriginalPartition >= 0 {
		out.Partition, out.Context = l.OriginalPartition, keepIn(pctx)
	}
	partition, offset := rec.Partition, rec.Offset
	r.pending = append(r.pending, pendingRedrive{target: target})
	r.produced.Add(1)
	r.cl.Produce(pctx, out, func(_ *kgo.Record, err error) {
		defer r.produced.Done()
		if err == nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if f, ok := r.failed[partition]; !ok || offset < f.offset {
			if r.failed == nil {
				r.failed = map[int32]failedAt{}
			}
			r.failed[partition] = failedAt{offset, fmt.Errorf("deadletter: redrive %s[%d]@%d to %s: %w", rec.Topic, partition, offset, target, err)}
		}
	})
	return nil
}

// checkTarget returns an error when topic does not exist.
func (r *redriver) checkTarget(topic string) error {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.ProduceTimeout)
	defer cancel()
	topics, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("deadletter: redrive: metadata of target topic %q: %w", topic, err)
	}
	td, ok := topics[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return &UnknownTargetError{Topic: topic}
	}
	if td.Err != nil {
		return fmt.Errorf("deadletter: redrive: target topic %q: %w", topic, td.Err)
	}
	r.checked[strings.Clone(topic)] = true
	return nil
}

// flush waits for the batch's acknowledgements and commits its progress
// (in the batch's transaction with ExactlyOnce). It is not cut short by
// ctx ending, so that an interrupted redrive keeps what it did.
func (r *redriver) flush() error {
	r.read = 0
	if r.cfg.DryRun || (len(r.dirty) == 0 && len(r.pending) == 0) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.cfg.ProduceTimeout)
	defer cancel()
	r.produced.Wait()
	r.mu.Lock()
	failed := r.failed
	r.failed = nil
	r.mu.Unlock()
	var perr error
	for p, f := range failed {
		perr = errors.Join(perr, f.err)
		// Everything before the first failure of a partition is
		// acknowledged: commit up to it.
		if f.offset < r.dirty[p] {
			r.dirty[p] = f.offset
		}
	}
	if r.cfg.ExactlyOnce {
		return errors.Join(perr, r.endTxn(ctx, perr == nil))
	}
	if err := r.commit(ctx, r.dirty); err != nil {
		return errors.Join(perr, fmt.Errorf("%w (the batch was produced; a resumed redrive repeats it)", err))
	}
	if perr == nil {
		r.settle()
	}
	clear(r.dirty)
	return perr
}

// settle counts the batch's records as redriven.
func (r *redriver) settle() {
	for _, p := range r.pending {
		r.res.Redriven++
		r.addTarget(p.target)
	}
	r.pending = r.pending[:0]
}

// addTarget counts a letter redriven to target. A new key is copied: the
// letter's strings are views of its fetch's memory.
func (r *redriver) addTarget(target string) {
	if _, ok := r.res.Targets[target]; !ok {
		target = strings.Clone(target)
	}
	r.res.Targets[target]++
}

// endTxn commits the progress in the open transaction and ends it:
// committed when commit is set and every step worked, else aborted.
func (r *redriver) endTxn(ctx context.Context, commit bool) error {
	var err error
	if commit {
		if !r.inTxn {
			// Only skipped or refused letters: their progress gets a
			// transaction of its own.
			if err = r.cl.BeginTransaction(); err != nil {
				return fmt.Errorf("deadletter: redrive: beginning a transaction: %w", err)
			}
			r.inTxn = true
		}
		err = r.txnCommitOffsets(ctx)
	}
	if !r.inTxn {
		return err
	}
	try := kgo.TryAbort
	if commit && err == nil {
		try = kgo.TryCommit
	}
	if eerr := r.cl.EndTransaction(ctx, try); eerr != nil && err == nil {
		err = fmt.Errorf("deadletter: redrive: ending the transaction: %w", eerr)
	}
	r.inTxn = false
	if try == kgo.TryCommit && err == nil {
		r.settle()
	} else {
		r.pending = r.pending[:0]
	}
	clear(r.dirty)
	return err
}

// txnCommitOffsets adds the batch's progress to the open transaction:
// AddOffsetsToTxn, then TxnOffsetCommit for the groupless redrive group
// (generation -1), as Java's sendOffsetsToTransaction does.
func (r *redriver) txnCommitOffsets(ctx context.Context) error {
	if len(r.dirty) == 0 {
		return nil
	}
	id, epoch, err := r.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("deadletter: redrive: producer id: %w", err)
	}
	txnID := RedriveTransactionalID(r.cfg.Group)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, r.cfg.Group
	for {
		resp, err := add.RequestWith(ctx, r.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if errors.Is(err, kerr.ConcurrentTransactions) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("deadletter: redrive: adding the progress to the transaction: %w", err)
		}
		break
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, r.cfg.Group, id, epoch
	req.Generation, req.MemberID = -1, ""
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = r.cfg.Topic
	for p, o := range r.dirty {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return fmt.Errorf("deadletter: redrive: committing progress of group %s in the transaction: %w", r.cfg.Group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("deadletter: redrive: committing progress of group %s in the transaction (%s[%d]): %w", r.cfg.Group, t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// wait paces the redrive to cfg.Rate.
func (r *redriver) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.interval <= 0 {
		return nil
	}
	now := time.Now()
	if r.next.IsZero() || r.next.Before(now) {
		r.next = now
	}
	if d := r.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	r.next = r.next.Add(r.interval)
	return nil
}

// commit commits offsets as the group's progress.
func (r *redriver) commit(ctx context.Context, offsets map[int32]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.AddOffset(r.cfg.Topic, p, o, -1)
	}
	resp, err := r.adm.CommitOffsets(ctx, r.cfg.Group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("deadletter: redrive: committing progress of group %s: %w", r.cfg.Group, err)
	}
	return nil
}

// redriveHeaders returns the original headers of l, without the provenance
// headers of an earlier redrive, followed by new provenance headers: the
// trace context of the letter's write among them, when it has one.
func redriveHeaders(l *Letter, rec *kgo.Record) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(l.OriginalHeaders)+3)
	for _, h := range l.OriginalHeaders {
		if h.Key == HeaderRedriveCount || h.Key == HeaderRedriveFrom || h.Key == HeaderRedriveTrace {
			continue
		}
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderRedriveCount, Value: []byte(strconv.Itoa(l.Redrives + 1))},
		kgo.RecordHeader{Key: HeaderRedriveFrom, Value: []byte(RedriveFrom(rec.Topic, rec.Partition, rec.Offset))},
	)
	if tp := letterTrace(l, rec); tp != nil {
		hs = append(hs, kgo.RecordHeader{Key: HeaderRedriveTrace, Value: tp})
	}
	return hs
}

// letterTrace is the value of the last HeaderTraceLetter among the headers
// an Antidote letter l (record rec) has after its original ones, nil if
// none.
func letterTrace(l *Letter, rec *kgo.Record) []byte {
	if l.Dialect != DialectAntidote || len(l.OriginalHeaders) > len(rec.Headers) {
		return nil
	}
	hs := rec.Headers[len(l.OriginalHeaders):]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == HeaderTraceLetter {
			return hs[i].Value
		}
	}
	return nil
}

// RedriveFrom formats the value of [HeaderRedriveFrom].
func RedriveFrom(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
