package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure one benchmark run.
type Options struct {
	// Brokers are the seed brokers; empty starts an in-process kfake cluster.
	Brokers      []string
	Records      int
	Partitions   int
	ValueSize    int
	Poison       []float64
	Rounds       int
	FetchMaxWait time.Duration
	// Linger, when not negative, is passed to the Antidote client as
	// kgo.ProducerLinger (it paces dead-letter writes). Negative keeps the
	// consumer's default (5ms).
	Linger time.Duration
	// Compression, when set, is the codec of the Antidote client's produce
	// batches (the dead letters), by kgo.ProducerBatchCompression: "none",
	// "snappy", "lz4" or "zstd". Empty keeps the client's default (snappy).
	Compression string
	Seed        uint64
	Verbose     bool
	// CPUProfileDir, when set, makes every consumer process write its CPU
	// profile there.
	CPUProfileDir string
	// BrokerPID, when not 0, is the process id of the broker, on this
	// machine: each run then reports the broker's CPU time during it
	// (/proc/PID/stat, Linux only).
	BrokerPID int
	// Exe is the program run for each consumer with childEnv=1: this
	// binary (os.Executable) when empty.
	Exe string
	// Progress receives progress lines and the children's stderr; nil
	// discards them.
	Progress io.Writer
}

// Window describes what the records/s measure.
const Window = "first record fetched -> last record settled (group join excluded); " +
	"'incl. join' columns: consumer created -> last record settled"

// CPUWindow describes what the CPU and RSS figures measure.
const CPUWindow = "user+sys CPU (rusage) and peak RSS (VmHWM) of the consumer's own process, " +
	"from exec to exit (startup, group join and shutdown included)"

// Targets of DESIGN.md, "Performance targets".
const (
	// TargetRatio is the least median antidote/bare ratio at every poison ratio.
	TargetRatio = 1.0
	// TargetLetterMicros is the most CPU a dead letter may cost beyond its
	// decode, in microseconds.
	TargetLetterMicros = 3.0
)

// Result is the outcome of a run.
type Result struct {
	Cluster       string   `json:"cluster"` // "kafka" or "kfake"
	Brokers       []string `json:"brokers"`
	Records       int      `json:"records"`
	Partitions    int      `json:"partitions"`
	ValueSize     int      `json:"value_size"`
	AvgValueBytes float64  `json:"avg_value_bytes"`
	Rounds        int      `json:"rounds"`
	Seed          uint64   `json:"seed"`
	FetchMaxWait  string   `json:"fetch_max_wait"`
	Linger        string   `json:"antidote_producer_linger"`
	Compression   string   `json:"antidote_compression"`
	GOMAXPROCS    int      `json:"gomaxprocs"`
	NumCPU        int      `json:"num_cpu"`
	Load          string   `json:"load_avg,omitempty"` // /proc/loadavg at the start, when readable
	Window        string   `json:"window"`
	CPUWindow     string   `json:"cpu_window"`
	TargetRatio   float64  `json:"target_ratio"`
	TargetLetter  float64  `json:"target_cpu_us_per_letter"`
	Seconds       float64  `json:"seconds"` // the whole run
	// FetchedOK is false when any consumer fetched other than the records
	// produced in any round (fetchedOK).
	FetchedOK bool  `json:"fetched_ok"`
	Rows      []Row `json:"rows"`
}

// Row is the result of one poison ratio.
type Row struct {
	Poison   float64 `json:"poison"`
	Pills    int     `json:"pills"`
	Produced int64   `json:"produced"` // records in the topic, checked after producing
	Topic    string  `json:"topic"`
	Bare     Summary `json:"bare"`
	Antidote Summary `json:"antidote"`
	// Ratio is the median over rounds i of antidote_i/bare_i records/s;
	// RatioMin and RatioMax are their spread.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
	// The same, with group join included in the window.
	RatioInclJoin float64 `json:"ratio_incl_join"`
	Pass          bool    `json:"pass"` // Ratio >= TargetRatio
	// FetchedOK: every run of the row fetched Produced records (fetchedOK).
	FetchedOK bool `json:"fetched_ok"`
	// CPUPerLetterMicros is (median Antidote CPU at this ratio - median
	// Antidote CPU at 0%) / pills, in µs; BareCPUPerPillMicros the same for
	// the bare consumer, which shows what the decode of a pill costs
	// against that of a valid record. Absent without a 0% row or pills.
	CPUPerLetterMicros   *float64 `json:"cpu_us_per_letter,omitempty"`
	BareCPUPerPillMicros *float64 `json:"bare_cpu_us_per_pill,omitempty"`
	// CPUPerLetterMin and CPUPerLetterMax are the spread of the same
	// figure computed round by round (round i here against round i at 0%).
	CPUPerLetterMin *float64 `json:"cpu_us_per_letter_min,omitempty"`
	CPUPerLetterMax *float64 `json:"cpu_us_per_letter_max,omitempty"`
	// Complete is false for the row a run stopped in (error or timeout).
	Complete bool `json:"complete"`
	// DLQRecords is the number of records in the dead-letter topic after
	// every Antidote round (pills x rounds when each pill was dead-lettered
	// once per round).
	DLQRecords int64 `json:"dlq_records"`
	Runs       []Run `json:"runs"`
}

// Summary sums up the complete runs of one consumer at one poison ratio:
// medians, and the spread of records/s.
type Summary struct {
	Runs                  int     `json:"runs"`
	RecordsPerSec         float64 `json:"records_per_sec"`
	RecordsPerSecMin      float64 `json:"records_per_sec_min"`
	RecordsPerSecMax      float64 `json:"records_per_sec_max"`
	RecordsPerSecInclJoin float64 `json:"records_per_sec_incl_join"`
	CPUSeconds            float64 `json:"cpu_seconds"`
	CPUMicrosPerRecord    float64 `json:"cpu_us_per_record"`
	MaxRSSBytes           int64   `json:"max_rss_bytes"`
	// BrokerCPUSeconds is the median of the broker's CPU time during a
	// run, with -broker-pid.
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
	// FetchedMin and FetchedMax are the least and most records fetched by
	// one run.
	FetchedMin int64 `json:"fetched_min"`
	FetchedMax int64 `json:"fetched_max"`
}

// Run is one timed consumer run, in its own process.
type Run struct {
	Consumer string `json:"consumer"` // "bare" or "antidote"
	Round    int    `json:"round"`
	Group    string `json:"group"`
	// Seconds from the first fetched record to the last settled record, and
	// from the consumer's creation to the last settled record.
	Seconds         float64 `json:"seconds"`
	SecondsInclJoin float64 `json:"seconds_incl_join"`
	RecordsPerSec   float64 `json:"records_per_sec"`
	RecordsPerSecIJ float64 `json:"records_per_sec_incl_join"`
	// Fetched counts records in the fetch batches the client read (more
	// than the record count when data is fetched again).
	Fetched int64 `json:"fetched"`
	// Bare: records seen, and values that failed json.Unmarshal.
	Seen         int `json:"seen,omitempty"`
	DecodeErrors int `json:"decode_errors,omitempty"`
	// Antidote: Stats after the run.
	Processed    uint64 `json:"processed,omitempty"`
	DeadLettered uint64 `json:"dead_lettered,omitempty"`
	Skipped      uint64 `json:"skipped,omitempty"`
	DLQErrors    uint64 `json:"dlq_write_errors,omitempty"`
	// Antidote: the produce batches its client wrote (the dead letters),
	// and their bytes before and after compression.
	ProducedBatches    int64 `json:"produced_batches,omitempty"`
	ProducedBytes      int64 `json:"produced_uncompressed_bytes,omitempty"`
	ProducedCompressed int64 `json:"produced_compressed_bytes,omitempty"`
	// Antidote: the produce requests its client sent, the median time from
	// the start of a request's write to the end of its response's read
	// (kgo.BrokerE2E.DurationE2E: the broker's time plus the network) and
	// the median time a request waited to be written (WriteWait); the
	// median and 99th percentile of a dead letter's write, from its start
	// to its acknowledgement (kgo.HookProduceRecordUnbuffered).
	ProduceRequests    int64   `json:"produce_requests,omitempty"`
	ProduceE2EP50Ms    float64 `json:"produce_e2e_p50_ms,omitempty"`
	ProduceQueuedP50Ms float64 `json:"produce_write_wait_p50_ms,omitempty"`
	LetterAckP50Ms     float64 `json:"letter_ack_p50_ms,omitempty"`
	LetterAckP99Ms     float64 `json:"letter_ack_p99_ms,omitempty"`
	// The median and 99th percentile of the time the process's goroutines
	// waited to run once runnable (runtime/metrics /sched/latencies:seconds,
	// upper bounds of its buckets), in milliseconds.
	SchedP50Ms float64 `json:"sched_latency_p50_ms"`
	SchedP99Ms float64 `json:"sched_latency_p99_ms"`
	// Antidote: the seconds of the window during which a partition held
	// its own buffer bound, its fetching paused or the poll loop waiting
	// for it (Stats, sampled every 1 ms: Partition.Paused == PauseFull).
	FullSeconds float64 `json:"full_seconds,omitempty"`
	// The process: wall seconds from exec to exit, its CPU time (from its
	// rusage), its peak RSS (its VmHWM, on Linux), and its CPU profile when
	// asked for.
	ProcessSeconds     float64 `json:"process_seconds"`
	UserSeconds        float64 `json:"user_seconds"`
	SysSeconds         float64 `json:"sys_seconds"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	CPUMicrosPerRecord float64 `json:"cpu_us_per_record"`
	MaxRSSBytes        int64   `json:"max_rss_bytes"`
	Profile            string  `json:"cpu_profile,omitempty"`
	// BrokerCPUSeconds is the broker's user+sys CPU time from the start
	// of the consumer's process to its exit, with -broker-pid: the work
	// the run made the broker do (fetches, and Antidote's dead letters),
	// on the same cores.
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
	// Complete is true when the run settled every record without error.
	Complete bool `json:"complete"`
}

func (o *Options) validate() error {
	switch {
	case o.Records <= 0:
		return errors.New("-records must be positive")
	case o.Partitions <= 0:
		return errors.New("-partitions must be positive")
	case o.ValueSize <= 0:
		return errors.New("-value-size must be positive")
	case o.Rounds <= 0:
		return errors.New("-rounds must be positive")
	case len(o.Poison) == 0:
		return errors.New("-poison: no ratios")
	case o.FetchMaxWait <= 0:
		return errors.New("-fetch-max-wait must be positive")
	}
	for _, r := range o.Poison {
		if r < 0 || r > 1 {
			return fmt.Errorf("-poison: ratio %g is not in [0,1]", r)
		}
	}
	return nil
}

func (o *Options) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// run is the benchmark: for each poison ratio, a fresh topic; then rounds,
// each of which runs the bare and the Antidote consumer on every topic, each
// run in its own process. Topics and groups are deleted at the end, also
// after an error.
func run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	res := &Result{
		Cluster: "kafka", Records: o.Records, Partitions: o.Partitions, ValueSize: o.ValueSize,
		Rounds: o.Rounds, Seed: o.Seed, FetchMaxWait: o.FetchMaxWait.String(),
		Linger: "consumer default (5ms)", Compression: "client default (snappy)", GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
		Window: Window, CPUWindow: CPUWindow, TargetRatio: TargetRatio, TargetLetter: TargetLetterMicros,
		FetchedOK: true,
	}
	defer func() { res.Seconds = time.Since(began).Seconds() }()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Load = strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
	}
	if o.Linger >= 0 {
		res.Linger = o.Linger.String()
	}
	if o.Compression != "" {
		res.Compression = o.Compression
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the bench binary to run the consumers: %w", err)
		}
		o.Exe = exe
	}
	if o.CPUProfileDir != "" {
		if err := os.MkdirAll(o.CPUProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
	}
	if len(o.Brokers) == 0 {
		fc, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("starting kfake: %w", err)
		}
		defer fc.Close()
		o.Brokers = fc.ListenAddrs()
		res.Cluster = "kfake"
		o.logf("no -brokers and %s unset: started an in-process kfake cluster at %s", envBrokers, strings.Join(o.Brokers, ","))
	}
	res.Brokers = o.Brokers

	admCl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	var topics, groups []string
	defer func() { cleanup(adm, topics, groups, &o) }()

	runID := uniqueSuffix()
	var valueBytes, valueCount int64
	// All topics first, so that the rounds can interleave the ratios.
	names := make([]string, len(o.Poison))
	for i, ratio := range o.Poison {
		names[i] = strings.ReplaceAll(strconv.FormatFloat(ratio*100, 'f', -1, 64), ".", "_")
		topic := fmt.Sprintf("antidote-bench-%s-poison-%s", runID, names[i])
		for _, t := range []string{topic, topic + ".dlq"} {
			if err := createTopic(ctx, adm, t, int32(o.Partitions)); err != nil {
				return res, err
			}
			topics = append(topics, t)
		}
		ds := newDataset(o.Seed, uint64(i), o.Records, o.ValueSize, ratio)
		res.Rows = append(res.Rows, Row{Poison: ratio, Pills: ds.pills, Topic: topic})
		row := &res.Rows[i]
		o.logf("poison %g%%: producing %d records (%d poison pills) to %s", ratio*100, o.Records, ds.pills, topic)
		start := time.Now()
		n, err := produce(ctx, &o, topic, ds)
		if err != nil {
			return res, err
		}
		if row.Produced, err = countRecords(ctx, adm, topic); err != nil {
			return res, err
		} else if row.Produced != int64(o.Records) {
			return res, fmt.Errorf("produce to %s: the topic holds %d records, want %d", topic, row.Produced, o.Records)
		}
		valueBytes += n
		valueCount += int64(o.Records)
		res.AvgValueBytes = float64(valueBytes) / float64(valueCount)
		o.logf("poison %g%%: produced in %v", ratio*100, time.Since(start).Round(time.Millisecond))
	}

	// Each round runs every ratio, bare then antidote: the runs that are
	// compared (the two consumers, and one ratio against another for the
	// CPU per dead letter) run close together, under the same load.
	for round := 1; round <= o.Rounds; round++ {
		for i := range res.Rows {
			row := &res.Rows[i]
			for _, kind := range []string{"bare", "antidote"} {
				group := fmt.Sprintf("%s-%s-r%d", row.Topic, kind, round)
				groups = append(groups, group)
				spec := childSpec{
					Consumer: kind, Brokers: o.Brokers, Topic: row.Topic, Group: group, Records: o.Records,
					FetchMaxWait: o.FetchMaxWait, Linger: o.Linger, Compression: o.Compression, Verbose: o.Verbose,
				}
				if o.CPUProfileDir != "" {
					spec.CPUProfile = filepath.Join(o.CPUProfileDir, fmt.Sprintf("poison-%s-%s-r%d.pprof", names[i], kind, round))
				}
				r, err := runProcess(ctx, &o, &spec)
				r.Consumer, r.Round, r.Group = kind, round, group
				row.Runs = append(row.Runs, r)
				if err != nil {
					for j := range res.Rows {
						summarize(res, &res.Rows[j])
					}
					return res, fmt.Errorf("poison %g%%, %s round %d: %w", row.Poison*100, kind, round, err)
				}
				warn := ""
				if !fetchedOK(r, row.Produced) {
					warn = fmt.Sprintf("  <-- FETCHED %d != PRODUCED %d", r.Fetched, row.Produced)
				}
				o.logf("round %d, poison %g%%: %-8s %8.0f records/s (%.2fs; %.2fs incl. join), CPU %.2fs, RSS %s, fetched %d%s",
					round, row.Poison*100, kind, r.RecordsPerSec, r.Seconds, r.SecondsInclJoin, r.CPUSeconds, mib(r.MaxRSSBytes), r.Fetched, warn)
			}
		}
	}
	for i := range res.Rows {
		row := &res.Rows[i]
		if row.DLQRecords, err = countRecords(ctx, adm, row.Topic+".dlq"); err != nil {
			return res, err
		}
		row.Complete = true
		summarize(res, row)
	}
	letterCosts(res)
	return res, nil
}

// runProcess runs one consumer in a child process and returns what it
// measured, with the process's own CPU time and peak RSS.
func runProcess(ctx context.Context, o *Options, spec *childSpec) (Run, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(24 * time.Hour)
	}
	spec.Deadline = deadline
	in, err := json.Marshal(spec)
	if err != nil {
		return Run{}, err
	}
	cmd := exec.CommandContext(ctx, o.Exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = o.Progress
	if o.Progress == nil {
		cmd.Stderr = io.Discard
	}
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = 10 * time.Second
	broker0 := procCPU(o.BrokerPID)
	start := time.Now()
	runErr := cmd.Run()
	brokerCPU := procCPU(o.BrokerPID) - broker0
	var res childResult
	if cmd.ProcessState != nil {
		ps := cmd.ProcessState
		res.ProcessSeconds = time.Since(start).Seconds()
		res.UserSeconds = ps.UserTime().Seconds()
		res.SysSeconds = ps.SystemTime().Seconds()
		res.CPUSeconds = res.UserSeconds + res.SysSeconds
	}
	keep := res.Run
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		if runErr == nil {
			runErr = fmt.Errorf("child output: %w", err)
		}
	}
	res.ProcessSeconds, res.UserSeconds, res.SysSeconds, res.CPUSeconds =
		keep.ProcessSeconds, keep.UserSeconds, keep.SysSeconds, keep.CPUSeconds
	res.CPUMicrosPerRecord = res.CPUSeconds * 1e6 / float64(spec.Records)
	res.Profile = spec.CPUProfile
	if o.BrokerPID != 0 {
		res.BrokerCPUSeconds = brokerCPU
	}
	switch {
	case res.Error != "":
		return res.Run, errors.New(res.Error)
	case runErr != nil:
		if cause := context.Cause(ctx); cause != nil {
			return res.Run, fmt.Errorf("consumer process: %w (%v)", runErr, cause)
		}
		return res.Run, fmt.Errorf("consumer process: %w", runErr)
	}
	res.Complete = true
	return res.Run, nil
}

// median of xs (not modified); 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fetchedOK reports whether run r fetched each of the produced records
// once. The Antidote consumer pauses a full partition without a record
// fetched twice on one broker (consumer.BufferLimits); with several, a
// pause may still drop what a broker's fetch brought meanwhile, and the
// check says so.
func fetchedOK(r Run, produced int64) bool {
	return r.Fetched == produced
}

// summarize fills the summaries, ratios and the fetched check of row from
// its complete runs, and clears res.FetchedOK on a mismatch.
func summarize(res *Result, row *Row) {
	byKind := map[string]map[int]Run{"bare": {}, "antidote": {}}
	row.FetchedOK = true
	for _, r := range row.Runs {
		if !fetchedOK(r, row.Produced) && (r.Complete || r.Fetched > row.Produced) {
			row.FetchedOK = false
			res.FetchedOK = false
		}
		if r.Complete {
			byKind[r.Consumer][r.Round] = r
		}
	}
	row.Bare = summary(byKind["bare"], row.Produced)
	row.Antidote = summary(byKind["antidote"], row.Produced)
	var ratios, ratiosIJ []float64
	for round, b := range byKind["bare"] {
		if a, ok := byKind["antidote"][round]; ok && b.RecordsPerSec > 0 && b.RecordsPerSecIJ > 0 {
			ratios = append(ratios, a.RecordsPerSec/b.RecordsPerSec)
			ratiosIJ = append(ratiosIJ, a.RecordsPerSecIJ/b.RecordsPerSecIJ)
		}
	}
	if len(ratios) > 0 {
		row.Ratio = median(ratios)
		row.RatioMin, row.RatioMax = slices.Min(ratios), slices.Max(ratios)
		row.RatioInclJoin = median(ratiosIJ)
	}
	row.Pass = row.Complete && row.Ratio >= TargetRatio
}

func summary(runs map[int]Run, records int64) Summary {
	s := Summary{Runs: len(runs)}
	if len(runs) == 0 {
		return s
	}
	var rps, rpsIJ, cpu, rss, broker []float64
	s.FetchedMin = -1
	for _, r := range runs {
		rps = append(rps, r.RecordsPerSec)
		rpsIJ = append(rpsIJ, r.RecordsPerSecIJ)
		cpu = append(cpu, r.CPUSeconds)
		broker = append(broker, r.BrokerCPUSeconds)
		rss = append(rss, float64(r.MaxRSSBytes))
		if s.FetchedMin < 0 || r.Fetched < s.FetchedMin {
			s.FetchedMin = r.Fetched
		}
		s.FetchedMax = max(s.FetchedMax, r.Fetched)
	}
	s.RecordsPerSec = median(rps)
	s.RecordsPerSecMin, s.RecordsPerSecMax = slices.Min(rps), slices.Max(rps)
	s.RecordsPerSecInclJoin = median(rpsIJ)
	s.CPUSeconds = median(cpu)
	s.BrokerCPUSeconds = median(broker)
	s.MaxRSSBytes = int64(median(rss))
	if records > 0 {
		s.CPUMicrosPerRecord = s.CPUSeconds * 1e6 / float64(records)
	}
	return s
}

// letterCosts fills the CPU per dead letter of every row with pills, against
// the complete 0% row: from the medians, and the spread of the same figure
// taken round by round (round i of the row against round i at 0%).
func letterCosts(res *Result) {
	var zero *Row
	for i := range res.Rows {
		if r := &res.Rows[i]; r.Poison == 0 && r.Complete {
			zero = r
		}
	}
	if zero == nil {
		return
	}
	zeroCPU := cpuByRound(zero, "antidote")
	for i := range res.Rows {
		r := &res.Rows[i]
		if r.Pills == 0 || !r.Complete || r.Antidote.Runs == 0 || zero.Antidote.Runs == 0 {
			continue
		}
		a := (r.Antidote.CPUSeconds - zero.Antidote.CPUSeconds) * 1e6 / float64(r.Pills)
		b := (r.Bare.CPUSeconds - zero.Bare.CPUSeconds) * 1e6 / float64(r.Pills)
		r.CPUPerLetterMicros, r.BareCPUPerPillMicros = &a, &b
		var per []float64
		for round, cpu := range cpuByRound(r, "antidote") {
			if z, ok := zeroCPU[round]; ok {
				per = append(per, (cpu-z)*1e6/float64(r.Pills))
			}
		}
		if len(per) > 0 {
			lo, hi := slices.Min(per), slices.Max(per)
			r.CPUPerLetterMin, r.CPUPerLetterMax = &lo, &hi
		}
	}
}

// cpuByRound maps the rounds of the complete runs of one consumer to their CPU seconds.
func cpuByRound(r *Row, consumer string) map[int]float64 {
	m := map[int]float64{}
	for _, run := range r.Runs {
		if run.Consumer == consumer && run.Complete {
			m[run.Round] = run.CPUSeconds
		}
	}
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// produce writes the records of ds to topic, record i to partition
// i mod partitions, and returns the total value bytes.
func produce(ctx context.Context, o *Options, topic string, ds *dataset) (int64, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.Brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
		bytes    int64
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	for i := 0; i < o.Records; i++ {
		k, v := ds.record(i)
		bytes += int64(len(v))
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % o.Partitions), Key: k, Value: v}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, fmt.Errorf("produce to %s: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return 0, fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	return bytes, nil
}

// countRecords sums the end offsets of topic (its topics are never
// compacted or truncated during a run).
func countRecords(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// createTopic creates topic and waits until every partition has a leader.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(cctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for {
		md, err := adm.Metadata(cctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) == int(partitions) {
				ready := true
				for _, p := range td.Partitions {
					ready = ready && p.Leader >= 0 && p.Err == nil
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("topic %s not ready: %w (last error: %v)", topic, cctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cleanup deletes the groups and topics of a run, bounded in time even when
// the run's context is over.
func cleanup(adm *kadm.Client, topics, groups []string, o *Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if len(groups) > 0 {
		if _, err := adm.DeleteGroups(ctx, groups...); err != nil {
			o.logf("cleanup: delete groups: %v", err)
		}
	}
	if len(topics) > 0 {
		resp, err := adm.DeleteTopics(ctx, topics...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			o.logf("cleanup: delete topics: %v", err)
		} else {
			o.logf("cleanup: deleted %d topics and %d groups", len(topics), len(groups))
		}
	}
}

func uniqueSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
