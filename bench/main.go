// Command bench is an end-to-end benchmark of the Antidote consumer against a
// bare franz-go group consumer reading the same topic, with and without
// poison pills. Each consumer runs in its own process, so that its CPU time
// and peak RSS are its own. See bench/README.md.
//
//	go run ./bench                              # in-process kfake cluster
//	go run ./bench -brokers 127.0.0.1:39092     # a real broker
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// envBrokers is the default of -brokers, shared with the integration tests.
const envBrokers = "ANTIDOTE_KAFKA_BROKERS"

type cliOptions struct {
	Options
	Output  string
	Timeout time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*cliOptions, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o       cliOptions
		brokers string
		poison  string
		linger  string
	)
	fs.StringVar(&brokers, "brokers", os.Getenv(envBrokers), "comma-separated seed brokers (default: $"+envBrokers+"; if empty, an in-process kfake cluster is started)")
	fs.IntVar(&o.Records, "records", defaultRecords, fmt.Sprintf("records produced per poison ratio; unset, %d on the in-process kfake cluster, which holds them in memory", kfakeRecords))
	fs.IntVar(&o.Partitions, "partitions", 4, "partitions of each topic (and of its dead-letter topic)")
	fs.IntVar(&o.ValueSize, "value-size", 200, "approximate size in bytes of each JSON order value")
	fs.StringVar(&poison, "poison", "0,0.01,0.10", "comma-separated poison-pill ratios; each gets a fresh topic")
	fs.IntVar(&o.Rounds, "rounds", 5, "rounds; each runs every ratio, bare then antidote, each run in its own process; medians are reported")
	fs.DurationVar(&o.FetchMaxWait, "fetch-max-wait", 500*time.Millisecond, "kgo.FetchMaxWait of both consumers")
	fs.StringVar(&o.Compression, "compression", "", "codec of the Antidote client's produce batches (the dead letters): none, snappy, lz4 or zstd (default: the client's, snappy)")
	fs.StringVar(&linger, "linger", "", "kgo.ProducerLinger of the Antidote client, which paces its dead-letter writes, e.g. 0 (default: the consumer's, 5ms)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the generated data and of the poison-pill positions")
	fs.StringVar(&o.Output, "o", "table", `output format: "table" or "json"`)
	fs.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "bound for the whole run; the program stops by itself after it")
	fs.StringVar(&o.CPUProfileDir, "cpuprofile", "", "a directory: each consumer process writes its CPU profile there, as poison-<ratio>-<consumer>-r<round>.pprof")
	fs.IntVar(&o.BrokerPID, "broker-pid", 0, "process id of the broker on this machine (scripts/kafka.sh's: $(cat .cache/kafka-run-39092/pid)): report the broker's CPU time during each run (Linux)")
	fs.BoolVar(&o.Verbose, "v", false, "verbose: consumer and client logs to stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: go run ./bench [flags]

For each poison ratio, bench creates a topic, produces -records JSON orders
(a fraction of them poison pills: garbage bytes or truncated JSON, at random
offsets, deterministic -seed), then times a bare franz-go group consumer and
the Antidote consumer on it, -rounds times each (each round runs every
ratio, bare then antidote), each run in its own process with a fresh group. It prints the median records/s of each, the
median antidote/bare ratio with its spread, the records fetched (which must
equal the records produced), CPU time and peak RSS of each process, and the
CPU per dead letter, against the design targets (ratio >= 1.0 at every
poison ratio, <= 3 µs of CPU per dead letter). Topics and groups are deleted
at the end. Progress goes to stderr, the result to stdout.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.Brokers = append(o.Brokers, b)
		}
	}
	recordsSet := false
	fs.Visit(func(f *flag.Flag) { recordsSet = recordsSet || f.Name == "records" })
	if len(o.Brokers) == 0 && !recordsSet {
		o.Records = kfakeRecords
	}
	for _, p := range strings.Split(poison, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		r, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return nil, fmt.Errorf("-poison: %q is not a number", p)
		}
		o.Poison = append(o.Poison, r)
	}
	o.Linger = -1
	if linger != "" {
		d, err := time.ParseDuration(linger)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-linger: %q is not a duration >= 0", linger)
		}
		o.Linger = d
	}
	if o.Compression != "" {
		if _, err := codecOf(o.Compression); err != nil {
			return nil, fmt.Errorf("-compression: %w", err)
		}
	}
	if o.Output != "table" && o.Output != "json" {
		return nil, fmt.Errorf(`-o: %q: want "table" or "json"`, o.Output)
	}
	if o.Timeout <= 0 {
		return nil, errors.New("-timeout must be positive")
	}
	return &o, o.validate()
}

// defaultRecords makes each timed window at least about 2 s on a 2-core
// machine (see bench/README.md).
const defaultRecords = 1_500_000

// kfakeRecords is the default on the in-process kfake cluster, whose
// numbers say little about a real broker and which keeps every record in
// this process's memory.
const kfakeRecords = 200_000

func main() {
	if isChild() {
		os.Exit(childMain(os.Stdin, os.Stdout, os.Stderr))
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	os.Exit(mainRun(o))
}

func mainRun(o *cliOptions) int {
	o.Progress = os.Stderr
	// An interrupt stops the run like the timeout: the consumer processes
	// are killed and the topics and groups deleted.
	sctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithTimeoutCause(sctx, o.Timeout,
		fmt.Errorf("-timeout %v reached", o.Timeout))
	defer cancel()
	// Cleanup after the timeout is bounded too; this is the last resort.
	watchdog := time.AfterFunc(o.Timeout+45*time.Second, func() {
		fmt.Fprintln(os.Stderr, "bench: still running 45s after -timeout; exiting")
		os.Exit(3)
	})
	defer watchdog.Stop()

	res, runErr := run(ctx, o.Options)
	if res != nil && len(res.Rows) > 0 || runErr == nil {
		if o.Output == "json" {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			_ = enc.Encode(res)
		} else {
			printTable(os.Stdout, res)
		}
		if !res.FetchedOK {
			fmt.Fprintln(os.Stderr, "bench: WARNING: a consumer fetched more or fewer records than were produced (see the fetched columns; Antidote may fetch 2% again): records were fetched again")
		}
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		return 1
	}
	return 0
}

func pct(r float64) string { return strconv.FormatFloat(r*100, 'f', -1, 64) + "%" }

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func printTable(w io.Writer, r *Result) {
	cluster := "kafka at " + strings.Join(r.Brokers, ",")
	if r.Cluster == "kfake" {
		cluster = "kfake, in-process (started by bench: no -brokers and $" + envBrokers + " unset) at " + strings.Join(r.Brokers, ",")
	}
	fmt.Fprintf(w, "Antidote end-to-end benchmark\n")
	fmt.Fprintf(w, "  cluster   %s\n", cluster)
	fmt.Fprintf(w, "  data      %d records per ratio, %d partitions, JSON values of %.0f bytes on average, seed %d\n", r.Records, r.Partitions, r.AvgValueBytes, r.Seed)
	fmt.Fprintf(w, "  rounds    %d; each round runs every ratio, bare then antidote, each run in its own process with a fresh group; medians reported\n", r.Rounds)
	fmt.Fprintf(w, "  window    %s\n", r.Window)
	fmt.Fprintf(w, "  cpu, rss  %s\n", r.CPUWindow)
	fmt.Fprintf(w, "  clients   kgo.FetchMaxWait %s for both; antidote producer linger: %s, compression: %s; GOMAXPROCS %d of %d CPUs\n", r.FetchMaxWait, r.Linger, r.Compression, r.GOMAXPROCS, r.NumCPU)
	if r.Load != "" {
		fmt.Fprintf(w, "  machine   load average %s at the start\n", r.Load)
	}
	fmt.Fprintf(w, "  took      %s\n\n", time.Duration(r.Seconds*float64(time.Second)).Round(time.Second))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "poison\tpills\tbare rec/s\tantidote rec/s\tratio\tmin-max\ttarget\tresult\t\tproduced\tfetched: bare\tantidote\tcheck\t")
	for _, row := range r.Rows {
		result := passMiss(row.Pass)
		if !row.Complete {
			result = "INCOMPLETE"
		}
		check := "= produced"
		if !row.FetchedOK {
			check = "<-- MISMATCH"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.3f\t%.3f-%.3f\t>=%.2f\t%s\t\t%d\t%s\t%s\t%s\t\n",
			pct(row.Poison), row.Pills, row.Bare.RecordsPerSec, row.Antidote.RecordsPerSec, row.Ratio, row.RatioMin, row.RatioMax,
			r.TargetRatio, result, row.Produced, fetched(row.Bare), fetched(row.Antidote), check)
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nCPU (median seconds of a process, and µs per record) and peak RSS (median MiB):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "poison\tbare CPU s\tµs/rec\tantidote CPU s\tµs/rec\tRSS: bare\tantidote\t\tCPU µs per dead letter (by round)\ttarget\tresult\tbare: µs per pill\t")
	for _, row := range r.Rows {
		letter, tgt, result, pill := "-", "-", "-", "-"
		if row.CPUPerLetterMicros != nil {
			letter = fmt.Sprintf("%.2f", *row.CPUPerLetterMicros)
			if row.CPUPerLetterMin != nil {
				letter += fmt.Sprintf(" (%.1f to %.1f)", *row.CPUPerLetterMin, *row.CPUPerLetterMax)
			}
			tgt = fmt.Sprintf("<=%.0f", r.TargetLetter)
			result = passMiss(*row.CPUPerLetterMicros <= r.TargetLetter)
			pill = fmt.Sprintf("%.2f", *row.BareCPUPerPillMicros)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t\t%s\t%s\t%s\t%s\t\n",
			pct(row.Poison), row.Bare.CPUSeconds, row.Bare.CPUMicrosPerRecord, row.Antidote.CPUSeconds, row.Antidote.CPUMicrosPerRecord,
			float64(row.Bare.MaxRSSBytes)/(1<<20), float64(row.Antidote.MaxRSSBytes)/(1<<20), letter, tgt, result, pill)
	}
	_ = tw.Flush()

	if len(r.Rows) > 0 && r.Rows[0].Bare.BrokerCPUSeconds+r.Rows[0].Antidote.BrokerCPUSeconds > 0 {
		fmt.Fprintf(w, "\nbroker CPU during a run (median seconds; the consumer and the broker share the machine's cores):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "poison\tbare run\tantidote run\tdifference\tper dead letter µs\t")
		for _, row := range r.Rows {
			d := row.Antidote.BrokerCPUSeconds - row.Bare.BrokerCPUSeconds
			per := "-"
			if row.Pills > 0 {
				per = fmt.Sprintf("%.2f", d*1e6/float64(row.Pills))
			}
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%+.2f\t%s\t\n", pct(row.Poison), row.Bare.BrokerCPUSeconds, row.Antidote.BrokerCPUSeconds, d, per)
		}
		_ = tw.Flush()
	}

	fmt.Fprintf(w, "\nruns (records/s, window s, s incl. join, records fetched, CPU s, peak RSS MiB; antidote: processed/dead-lettered):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range r.Rows {
		for _, run := range row.Runs {
			detail := fmt.Sprintf("seen %d, decode errors %d", run.Seen, run.DecodeErrors)
			if run.Consumer == "antidote" {
				detail = fmt.Sprintf("processed %d, dead-lettered %d", run.Processed, run.DeadLettered)
				if run.ProducedBatches > 0 {
					detail += fmt.Sprintf(" in %d produce batches (%.1f letters each, %s)", run.ProducedBatches,
						float64(run.DeadLettered)/float64(run.ProducedBatches), compressed(run.ProducedBytes, run.ProducedCompressed))
					detail += fmt.Sprintf(", %d produce requests (p50: %.1f ms on the wire, %.1f ms before), letter ack p50 %.1f ms p99 %.1f ms",
						run.ProduceRequests, run.ProduceE2EP50Ms, run.ProduceQueuedP50Ms, run.LetterAckP50Ms, run.LetterAckP99Ms)
				}
				if run.FullSeconds > 0 {
					detail += fmt.Sprintf("; a partition held its buffer bound %.2fs", run.FullSeconds)
				}
			}
			detail += fmt.Sprintf("; goroutines waited to run p50 %.3f ms p99 %.2f ms", run.SchedP50Ms, run.SchedP99Ms)
			if !fetchedOK(run, row.Produced) {
				detail += fmt.Sprintf("  <-- FETCHED %d != PRODUCED %d", run.Fetched, row.Produced)
			}
			if !run.Complete {
				detail += "  (incomplete)"
			}
			fmt.Fprintf(tw, "%s\t%s\tr%d\t%.0f\t%.3fs\t%.3fs\t%d\t%.2fs\t%.0f\t  %s\n", pct(row.Poison), run.Consumer, run.Round,
				run.RecordsPerSec, run.Seconds, run.SecondsInclJoin, run.Fetched, run.CPUSeconds, float64(run.MaxRSSBytes)/(1<<20), detail)
		}
		if row.Pills > 0 || row.DLQRecords > 0 {
			fmt.Fprintf(tw, "%s\tdlq\t\t\t\t\t%d\t\t\t  records in %s.dlq (want pills x rounds = %d)\n", pct(row.Poison), row.DLQRecords, row.Topic, int64(row.Pills)*int64(r.Rounds))
		}
	}
	_ = tw.Flush()
	if !r.FetchedOK {
		fmt.Fprintf(w, "\n!!! FETCHED != PRODUCED in at least one run (marked above): the client fetched records again. Every run must fetch each record once.\n")
	}
}

// fetched prints the records fetched by the runs of s: one number when
// every run fetched the same, else the range.
func fetched(s Summary) string {
	if s.Runs == 0 {
		return "-"
	}
	if s.FetchedMin == s.FetchedMax {
		return strconv.FormatInt(s.FetchedMax, 10)
	}
	return fmt.Sprintf("%d-%d", s.FetchedMin, s.FetchedMax)
}

// compressed describes the compression of the produced bytes.
func compressed(raw, out int64) string {
	if raw <= 0 || out >= raw {
		return fmt.Sprintf("%.1f MB, not compressed", float64(raw)/1e6)
	}
	return fmt.Sprintf("%.1f MB compressed to %.0f%%", float64(raw)/1e6, 100*float64(out)/float64(raw))
}
