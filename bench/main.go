// Command bench is an end-to-end benchmark of the Antidote consumer against a
// bare franz-go group consumer reading the same topic, with and without
// poison pills. See bench/README.md.
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
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// envBrokers is the default of -brokers, shared with the integration tests.
const envBrokers = "ANTIDOTE_KAFKA_BROKERS"

type cliOptions struct {
	Options
	Output     string
	Timeout    time.Duration
	CPUProfile string
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
	fs.IntVar(&o.Records, "records", 200000, "records produced per poison ratio")
	fs.IntVar(&o.Partitions, "partitions", 4, "partitions of each topic (and of its dead-letter topic)")
	fs.IntVar(&o.ValueSize, "value-size", 200, "approximate size in bytes of each JSON order value")
	fs.StringVar(&poison, "poison", "0,0.01,0.10", "comma-separated poison-pill ratios; each gets a fresh topic")
	fs.IntVar(&o.Rounds, "rounds", 2, "timed runs per consumer and ratio, alternating bare/antidote; the best is reported")
	fs.DurationVar(&o.FetchMaxWait, "fetch-max-wait", 500*time.Millisecond, "kgo.FetchMaxWait of both consumers")
	fs.StringVar(&linger, "linger", "", "kgo.ProducerLinger of the Antidote client, which paces its dead-letter writes, e.g. 0 (default: the consumer's, 0)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the generated data and of the poison-pill positions")
	fs.StringVar(&o.Output, "o", "table", `output format: "table" or "json"`)
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "bound for the whole run; the program stops by itself after it")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (samples carry the pprof label consumer=bare|antidote or phase=produce)")
	fs.BoolVar(&o.Verbose, "v", false, "verbose: consumer and client logs to stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: go run ./bench [flags]

For each poison ratio, bench creates a topic, produces -records JSON orders
(a fraction of them poison pills: garbage bytes or truncated JSON, at random
offsets, deterministic -seed), then times a bare franz-go group consumer and
the Antidote consumer on it, alternately, -rounds times each, each with a
fresh group. It prints the best records/s of each, their ratio and the
design target (>=0.95 at 0% poison, >=0.90 at 1%, >=0.80 at 10%).
Topics and groups are deleted at the end. Progress goes to stderr, the
result to stdout.

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
	if o.Output != "table" && o.Output != "json" {
		return nil, fmt.Errorf(`-o: %q: want "table" or "json"`, o.Output)
	}
	if o.Timeout <= 0 {
		return nil, errors.New("-timeout must be positive")
	}
	return &o, o.validate()
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	os.Exit(mainRun(o))
}

func mainRun(o *cliOptions) int {
	o.Progress = os.Stderr
	ctx, cancel := context.WithTimeoutCause(context.Background(), o.Timeout,
		fmt.Errorf("-timeout %v reached", o.Timeout))
	defer cancel()
	// Cleanup after the timeout is bounded too; this is the last resort.
	watchdog := time.AfterFunc(o.Timeout+45*time.Second, func() {
		fmt.Fprintln(os.Stderr, "bench: still running 45s after -timeout; exiting")
		os.Exit(3)
	})
	defer watchdog.Stop()

	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}

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
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		return 1
	}
	return 0
}

func pct(r float64) string { return strconv.FormatFloat(r*100, 'f', -1, 64) + "%" }

func printTable(w io.Writer, r *Result) {
	cluster := "kafka at " + strings.Join(r.Brokers, ",")
	if r.Cluster == "kfake" {
		cluster = "kfake, in-process (started by bench: no -brokers and $" + envBrokers + " unset) at " + strings.Join(r.Brokers, ",")
	}
	fmt.Fprintf(w, "Antidote end-to-end benchmark\n")
	fmt.Fprintf(w, "  cluster   %s\n", cluster)
	fmt.Fprintf(w, "  data      %d records per ratio, %d partitions, JSON values of %.0f bytes on average, seed %d\n", r.Records, r.Partitions, r.AvgValueBytes, r.Seed)
	fmt.Fprintf(w, "  rounds    %d per consumer, alternating bare/antidote, fresh group each; best records/s reported\n", r.Rounds)
	fmt.Fprintf(w, "  window    %s\n", r.Window)
	fmt.Fprintf(w, "  clients   kgo.FetchMaxWait %s for both; antidote producer linger: %s; GOMAXPROCS %d\n\n", r.FetchMaxWait, r.Linger, r.GOMAXPROCS)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "poison\tpills\tbare rec/s\tantidote rec/s\tratio\ttarget\tresult\t\tincl. join: bare\tantidote\tratio\t")
	for _, row := range r.Rows {
		tgt, result := "-", "-"
		if row.Target > 0 {
			tgt = fmt.Sprintf(">=%.2f", row.Target)
			result = "MISS"
			if row.Pass {
				result = "PASS"
			}
		}
		if !row.Complete {
			result = "INCOMPLETE"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.3f\t%s\t%s\t\t%.0f\t%.0f\t%.3f\t\n",
			pct(row.Poison), row.Pills, row.Bare, row.Antidote, row.Ratio, tgt, result,
			row.BareInclJoin, row.AntidoteInclJoin, row.RatioInclJoin)
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nruns (records/s, window seconds, seconds incl. join, records fetched; antidote: processed/dead-lettered):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range r.Rows {
		for _, run := range row.Runs {
			detail := fmt.Sprintf("seen %d, decode errors %d", run.Seen, run.DecodeErrors)
			if run.Consumer == "antidote" {
				detail = fmt.Sprintf("processed %d, dead-lettered %d", run.Processed, run.DeadLettered)
			}
			fmt.Fprintf(tw, "%s\t%s\tr%d\t%.0f\t%.3fs\t%.3fs\t%d\t  %s\n", pct(row.Poison), run.Consumer, run.Round,
				run.RecordsPerSec, run.Seconds, run.SecondsInclJoin, run.Fetched, detail)
		}
		if row.Pills > 0 || row.DLQRecords > 0 {
			fmt.Fprintf(tw, "%s\tdlq\t\t\t\t\t%d\t  records in %s.dlq (want pills x rounds = %d)\n", pct(row.Poison), row.DLQRecords, row.Topic, int64(row.Pills)*int64(r.Rounds))
		}
	}
	_ = tw.Flush()
}
