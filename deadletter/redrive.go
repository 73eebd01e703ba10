package deadletter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
)

// DefaultMaxRedrives is the default of [RedriveConfig.MaxRedrives].
const DefaultMaxRedrives = 3

// DefaultProduceTimeout is the default of [RedriveConfig.ProduceTimeout].
const DefaultProduceTimeout = 30 * time.Second

// RedriveConfig says what [Redrive] does. The zero value of every optional
// field is a valid default.
type RedriveConfig struct {
	// Topic is the dead-letter topic to redrive. Required.
	Topic string
	// To is the topic every letter goes to. Optional; default: each
	// letter's original topic.
	To string
	// Filter selects the letters to redrive. Optional; default all.
	// Letters it does not select are skipped, and counted.
	Filter Filter
	// Group is the consumer group under which progress is committed on
	// Topic, so that an interrupted redrive resumes where it stopped.
	// Optional; default [RedriveConfig.DefaultGroup].
	Group string
	// MaxRedrives refuses a letter whose original record was already
	// redriven this many times. Optional; default [DefaultMaxRedrives];
	// negative: no limit.
	MaxRedrives int
	// DryRun reads and decides, but neither produces nor commits.
	DryRun bool
	// Rate bounds the redrive to this many records per second. Optional;
	// default unbounded.
	Rate float64
	// Limit stops the redrive after this many records were redriven.
	// Optional; default no limit.
	Limit int
	// ProduceTimeout bounds the wait for one record's acknowledgement.
	// Optional; default [DefaultProduceTimeout].
	ProduceTimeout time.Duration
	// IdleTimeout is [ScanConfig.IdleTimeout].
	IdleTimeout time.Duration
	// Progress, when set, is called after every letter read, from the
	// goroutine that called Redrive, with the result so far.
	Progress func(RedriveResult)
}

// DefaultGroup returns the group used when Group is empty:
// "antidote-redrive-<topic>", followed by a hash of the target and
// filter when either is set. A command line run again resumes its own
// progress, and a redrive with another filter keeps separate progress
// rather than passing over the letters the first one skipped.
func (c *RedriveConfig) DefaultGroup() string {
	g := "antidote-redrive-" + c.Topic
	if c.To == "" && c.Filter.IsZero() {
		return g
	}
	f := c.Filter
	sum := sha256.Sum256(fmt.Appendf(nil, "to=%s\x00topic=%s\x00stage=%s\x00class=%s\x00reason=%s\x00since=%d\x00until=%d",
		c.To, f.OriginalTopic, f.Stage, f.Class, f.Reason, unixOrZero(f.Since), unixOrZero(f.Until)))
	return g + "-" + hex.EncodeToString(sum[:4])
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
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
	}
	return nil
}

// RedriveResult counts what [Redrive] did.
type RedriveResult struct {
	Group string // the consumer group holding the progress
	// Scanned counts the letters read in this run (after the committed
	// progress).
	Scanned int
	// Redriven counts the letters re-produced (in a dry run: that would
	// be).
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
	// DryRun is copied from the configuration.
	DryRun bool
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
// [HeaderRedriveCount] and [HeaderRedriveFrom] (an older redrive's
// provenance headers among the original ones are replaced).
//
// Progress is committed as the offsets of cfg.Group on cfg.Topic, each
// record's only after its re-produce was acknowledged, and Redrive starts
// from the committed offsets. When ctx ends, Redrive stops between two
// records, commits, and returns the result so far with ctx's error: run
// again, it neither repeats nor skips a record. (A crash between an
// acknowledgement and its commit repeats that one record.) Only one
// redrive may use a group at a time.
//
// Redrive reads and produces with cl, which must not be a group consumer.
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
	res := RedriveResult{Group: cfg.Group, Targets: map[string]int{}, DryRun: cfg.DryRun}
	adm := kadm.NewClient(cl)

	starts, ends, err := Bounds(ctx, cl, cfg.Topic)
	if err != nil {
		return res, err
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, cfg.Group, cfg.Topic)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// A group that never committed: no progress yet.
		committed, err = nil, nil
	}
	if err != nil {
		return res, fmt.Errorf("deadletter: redrive: progress of group %s: %w", cfg.Group, err)
	}
	from := map[int32]int64{}
	for p, end := range ends {
		at := starts[p]
		if o, ok := committed.Lookup(cfg.Topic, p); ok && o.At > at {
			at = o.At
		}
		from[p] = at
		if end > at {
			res.Remaining += end - at
		}
	}

	r := &redriver{ctx: ctx, cfg: cfg, cl: cl, adm: adm, res: &res, dirty: map[int32]int64{}}
	if cfg.Rate > 0 {
		r.interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	err = Scan(ctx, cl, ScanConfig{Topic: cfg.Topic, From: from, IdleTimeout: cfg.IdleTimeout}, r.record)
	if cerr := r.commit(ctx); cerr != nil && err == nil {
		err = cerr
	}
	return res, err
}

type redriver struct {
	ctx      context.Context
	cfg      RedriveConfig
	cl       *kgo.Client
	adm      *kadm.Client
	res      *RedriveResult
	dirty    map[int32]int64 // partition -> next offset, not yet committed
	interval time.Duration
	next     time.Time
}

func (r *redriver) refuse(rec *kgo.Record, why string) {
	r.res.Refused++
	if len(r.res.Refusals) < maxRefusals {
		r.res.Refusals = append(r.res.Refusals, Refusal{Partition: rec.Partition, Offset: rec.Offset, Reason: why})
	}
}

// record handles one dead letter.
func (r *redriver) record(rec *kgo.Record) error {
	committed, err := r.decide(rec)
	if err != nil {
		return err
	}
	if !committed && !r.cfg.DryRun {
		// Skipped or refused: committed with the next redriven record,
		// or at the end.
		r.dirty[rec.Partition] = rec.Offset + 1
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress(*r.res)
	}
	if r.cfg.Limit > 0 && r.res.Redriven >= r.cfg.Limit {
		return ErrStop
	}
	return nil
}

// decide redrives, refuses or skips rec, and reports whether its progress
// is committed.
func (r *redriver) decide(rec *kgo.Record) (bool, error) {
	// ctx is checked between records only: a record is either redriven
	// and committed, or left for the next run.
	r.res.Scanned++
	l, err := ParseRecord(rec)
	if l.Dialect != DialectUnknown && !r.cfg.Filter.Match(l) {
		r.res.Skipped++
		return false, nil
	}
	if l.Dialect == DialectUnknown && !r.cfg.Filter.IsZero() {
		r.res.Skipped++
		return false, nil
	}
	switch {
	case errors.Is(err, ErrUnknownDialect):
		r.refuse(rec, "not a dead letter: no known failure headers")
		return false, nil
	case err != nil:
		// Malformed headers: refuse rather than guess.
		r.refuse(rec, strings.ReplaceAll(err.Error(), "deadletter: ", ""))
		return false, nil
	case l.Dialect == DialectShareGroup && rec.Key == nil && rec.Value == nil:
		r.refuse(rec, "no copy of the record (share group without errors.deadletterqueue.copy.record.enable)")
		return false, nil
	}
	target := r.cfg.To
	if target == "" {
		target = l.OriginalTopic
	}
	switch {
	case target == "":
		r.refuse(rec, "original topic unknown (use a target topic)")
		return false, nil
	case target == r.cfg.Topic:
		r.refuse(rec, "original topic is the dead-letter topic itself")
		return false, nil
	case r.cfg.MaxRedrives >= 0 && l.Redrives >= r.cfg.MaxRedrives:
		r.refuse(rec, fmt.Sprintf("redriven %d times already (max %d)", l.Redrives, r.cfg.MaxRedrives))
		return false, nil
	}
	if err := r.wait(r.ctx); err != nil {
		return false, err
	}
	if !r.cfg.DryRun {
		out := &kgo.Record{Topic: target, Key: rec.Key, Value: rec.Value, Headers: redriveHeaders(l, rec)}
		// The produce is not cut short by ctx: once sent, its outcome is
		// waited for and committed.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.cfg.ProduceTimeout)
		err := r.cl.ProduceSync(pctx, out).FirstErr()
		cancel()
		if err != nil {
			return false, fmt.Errorf("deadletter: redrive %s[%d]@%d to %s: %w", rec.Topic, rec.Partition, rec.Offset, target, err)
		}
		r.dirty[rec.Partition] = rec.Offset + 1
		if err := r.commit(r.ctx); err != nil {
			return true, fmt.Errorf("%w (the record %s[%d]@%d was redriven; a resumed redrive repeats it)", err, rec.Topic, rec.Partition, rec.Offset)
		}
	}
	r.res.Redriven++
	r.res.Targets[target]++
	return !r.cfg.DryRun, nil
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

// commit commits the progress not yet committed. It is not cut short by
// ctx ending, so that an interrupted redrive keeps what it did.
func (r *redriver) commit(ctx context.Context) error {
	if len(r.dirty) == 0 || r.cfg.DryRun {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ProduceTimeout)
	defer cancel()
	os := kadm.Offsets{}
	for p, o := range r.dirty {
		os.AddOffset(r.cfg.Topic, p, o, -1)
	}
	resp, err := r.adm.CommitOffsets(cctx, r.cfg.Group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("deadletter: redrive: committing progress of group %s: %w", r.cfg.Group, err)
	}
	clear(r.dirty)
	return nil
}

// redriveHeaders returns the original headers of l, without the provenance
// headers of an earlier redrive, followed by new provenance headers.
func redriveHeaders(l *Letter, rec *kgo.Record) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(l.OriginalHeaders)+2)
	for _, h := range l.OriginalHeaders {
		if h.Key == HeaderRedriveCount || h.Key == HeaderRedriveFrom {
			continue
		}
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return append(hs,
		kgo.RecordHeader{Key: HeaderRedriveCount, Value: []byte(strconv.Itoa(l.Redrives + 1))},
		kgo.RecordHeader{Key: HeaderRedriveFrom, Value: []byte(RedriveFrom(rec.Topic, rec.Partition, rec.Offset))},
	)
}

// RedriveFrom formats the value of [HeaderRedriveFrom].
func RedriveFrom(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
