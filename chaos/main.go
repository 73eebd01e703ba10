// Command chaos runs randomized fault runs against the consumer and judges
// them with an outside oracle (issue 23).
//
//	go run ./chaos -backend kfake -runs 20
//	go run ./chaos -backend cluster -runs 3 -seed 42 -o json
//
// From a seed it generates a scenario: a row of the consumer's table of modes
// (one at a time, keyed lanes, batch handler; retry in place or retry tiers;
// exactly-once; durable attempts; classic or KIP-848 group protocol; buffer
// limits), a workload (partitions, null, empty and other keys, record sizes
// up to the topic's limit, poison pills of the kinds `antidote poison`
// makes, permanent and transient failures with a per-record count, handler
// latency) and faults at random moments
// (consumer processes killed and restarted, members joining and leaving,
// operator pause/resume, skip and kill switch, the source topic growing
// partitions; on the three-broker cluster, partition leaders SIGKILLed and
// restarted or SIGSTOPped and continued, and network faults between the
// consumers and a partition leader through a TCP fault proxy: latency, a
// cut, a slow close). The consumers run as child
// processes of this program that log every handler call; the oracle reads
// only those logs and what Kafka holds.
//
// A failing seed prints the command that reruns it and keeps its folder
// (scenario.json, the children's logs, group.txt); -shrink N tries smaller
// scenarios that still fail, and -scenario runs a scenario from its file.
//
// The kfake backend runs an in-process kfake cluster per run on loopback; the
// cluster backend uses scripts/kafka.sh cluster (started, and stopped at the
// end, if it is not running).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	var (
		backends = flag.String("backend", "kfake", "kfake, cluster, or both (kfake,cluster)")
		runs     = flag.Int("runs", 5, "runs per backend")
		seed     = flag.Uint64("seed", 0, "seed of the first run (the next runs take the following seeds); 0: random")
		output   = flag.String("o", "table", "output: table or json")
		keep     = flag.Bool("keep", false, "keep every run's folder (logs, scenario), not only the failing ones")
		budget   = flag.Duration("budget", 0, "start no new run after this long (0: no limit); runs always end by themselves")
		verbose  = flag.Bool("v", false, "log each run as it ends")
		show     = flag.Bool("show", false, "print the scenario of -seed and exit")
		shrinkN  = flag.Int("shrink", 0, "shrink each failing scenario with up to this many more runs (fewer faults, records, members)")
		scenario = flag.String("scenario", "", "run the scenario in this JSON file (a failing run's scenario.json, edited to shrink it by hand) instead of generating one")
		without  = flag.String("without", "", "fault kinds not to draw, comma-separated (kill, leave, join, pause, skip, killswitch, grow, delete, broker-kill, broker-hang, net-latency, net-cut, net-slow-close), and eos-delete: no delete in exactly-once scenarios")

		child   = flag.String("child", "", "internal: run as a consumer process of the harness, in this run folder (it stops when its standard input ends)")
		member  = flag.Int("member", 0, "")
		brokers = flag.String("brokers", "", "")
		proxy   = flag.String("proxy", "", "")
	)
	flag.Parse()
	if *child != "" { // a consumer process: see runChild
		os.Exit(runChild(*child, *member, strings.Split(*brokers, ","), parseRoutes(*proxy)))
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()%1_000_000_000) + 1
	}
	if *show {
		b, _ := json.MarshalIndent(Generate(*seed, strings.Split(*backends, ",")[0], splitList(*without)...), "", "  ")
		fmt.Println(string(b))
		return
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintln(os.Stderr, "chaos: -o is table or json")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...)
	}
	var sums []*Summary
	failed := false
	start := time.Now()
	for _, b := range strings.Split(*backends, ",") {
		if ctx.Err() != nil {
			break // interrupted: no next backend
		}
		var fixed *Scenario
		if *scenario != "" {
			raw, err := os.ReadFile(*scenario)
			if err == nil {
				fixed = new(Scenario)
				err = json.Unmarshal(raw, fixed)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "chaos: -scenario:", err)
				os.Exit(2)
			}
			fixed.Backend = b
			*runs = 1
		}
		s, err := runBackend(ctx, b, *seed, *runs, splitList(*without), fixed, *shrinkN, *keep, *verbose, start, *budget, logf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(2)
		}
		sums = append(sums, s)
		failed = failed || s.Violations > 0 || s.Errors > 0
	}
	if *output == "json" {
		enc := json.NewEncoder(os.Stdout)
		for _, s := range sums {
			enc.Encode(s)
		}
	} else {
		printTable(os.Stdout, sums)
	}
	if failed {
		os.Exit(1)
	}
}

// Summary is the result of the runs on one backend: the JSON object of -o json.
type Summary struct {
	Backend    string         `json:"backend"`
	Runs       int            `json:"runs"`
	FirstSeed  uint64         `json:"first_seed"`
	Violations int            `json:"violations"`
	Errors     int            `json:"errors"` // runs that could not be judged
	Records    int            `json:"records"`
	Faults     map[string]int `json:"faults"`
	ByKind     map[string]int `json:"violations_by_kind"`
	Modes      map[string]int `json:"modes"`
	Seconds    float64        `json:"seconds"`
	PeakRSSKiB int64          `json:"peak_rss_kib"` // the largest peak RSS of a consumer process
	// Deleted counts the records dead-lettered (or forwarded to a tier)
	// whose acknowledged letter a delete fault destroyed with its topic:
	// not lost, and not read by the oracle either.
	Deleted int      `json:"deleted_by_fault"`
	Failed  []Failed `json:"failed,omitempty"`
}

// Failed is a run with violations or an error.
type Failed struct {
	Seed       uint64      `json:"seed"`
	Mode       string      `json:"mode"`
	Faults     []string    `json:"faults"`
	Violations []Violation `json:"violations,omitempty"`
	Error      string      `json:"error,omitempty"`
	Dir        string      `json:"dir"`
	Rerun      string      `json:"rerun"`
	Shrunk     string      `json:"shrunk,omitempty"` // the command that runs the smallest scenario that still failed
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func runBackend(ctx context.Context, name string, seed uint64, runs int, without []string, fixed *Scenario, shrinkN int, keep, verbose bool, start time.Time, budget time.Duration, logf func(string, ...any)) (*Summary, error) {
	s := &Summary{Backend: name, FirstSeed: seed, Faults: map[string]int{}, ByKind: map[string]int{}, Modes: map[string]int{}}
	t0 := time.Now()
	var cluster *clusterBackend
	switch name {
	case "kfake":
	case "cluster":
		script, err := findScript()
		if err != nil {
			return nil, err
		}
		if cluster, err = newCluster(script, logf); err != nil {
			return nil, err
		}
		defer cluster.shutdown()
	default:
		return nil, fmt.Errorf("unknown backend %q (kfake or cluster)", name)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if fixed != nil {
		seed = fixed.Seed
		s.FirstSeed = seed
	}
	logf("%s: %d runs from seed %d", name, runs, seed)
	for i := range runs {
		if ctx.Err() != nil || (budget > 0 && time.Since(start) > budget) {
			break
		}
		sd := seed + uint64(i)
		sc := Generate(sd, name, without...)
		if fixed != nil {
			sc, sd = fixed, fixed.Seed
		}
		run := func(sc *Scenario) (Result, error) {
			var be Backend = cluster
			if cluster == nil {
				kb, err := newKfake()
				if err != nil {
					return Result{}, err
				}
				be = kb
			}
			defer be.Close()
			return runScenario(ctx, sc, be, exe, keep, logf), nil
		}
		res, err := run(sc)
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil && res.Err != "" && len(res.Violations) == 0 {
			// Interrupted (SIGINT) before it could be judged: the run
			// was cut short, so its error says nothing; not counted.
			logf("%s seed %d: interrupted, not judged (%s)", name, sd, res.Dir)
			break
		}
		s.Runs++
		s.Records += res.Records
		s.Modes[sc.Mode.Dispatch]++
		for k, n := range res.Faults {
			s.Faults[k] += n
		}
		s.Violations += len(res.Violations)
		s.PeakRSSKiB = max(s.PeakRSSKiB, res.PeakRSSKiB)
		s.Deleted += res.Deleted
		for _, v := range res.Violations {
			s.ByKind[v.Kind]++
		}
		if res.Err != "" {
			s.Errors++
		}
		if verbose || len(res.Violations) > 0 || res.Err != "" {
			status := "ok"
			if len(res.Violations) > 0 {
				status = fmt.Sprintf("%d violations", len(res.Violations))
			}
			if res.Err != "" {
				status = "error: " + res.Err
			}
			if res.Deleted > 0 {
				status += fmt.Sprintf(" (%d records dead-lettered or forwarded, then deleted by the fault)", res.Deleted)
			}
			logf("%s seed %d (%s, %d records, faults %v) in %v: %s", name, sd, res.Mode, res.Records, kinds(sc), res.Duration.Round(100*time.Millisecond), status)
			for _, n := range res.Notes {
				logf("  note: %s", n)
			}
		}
		if len(res.Violations) > 0 || res.Err != "" {
			vs := res.Violations
			if len(vs) > 20 {
				vs = vs[:20]
			}
			f := Failed{Seed: sd, Mode: res.Mode, Faults: kinds(sc), Violations: vs, Error: res.Err, Dir: res.Dir,
				Rerun: rerun(name, sd, without, fixed != nil, res.Dir)}
			if shrinkN > 0 && len(res.Violations) > 0 {
				if small, path := shrink(ctx, sc, res, shrinkN, run, logf); small != nil {
					f.Shrunk = fmt.Sprintf("go run ./chaos -backend %s -scenario %s", name, path)
				}
			}
			s.Failed = append(s.Failed, f)
		}
	}
	s.Seconds = time.Since(t0).Seconds()
	return s, nil
}

func rerun(backend string, seed uint64, without []string, fixed bool, dir string) string {
	if fixed {
		return fmt.Sprintf("go run ./chaos -backend %s -scenario %s/scenario.json", backend, dir)
	}
	cmd := fmt.Sprintf("go run ./chaos -backend %s -runs 1 -seed %d", backend, seed)
	if len(without) > 0 {
		cmd += " -without " + strings.Join(without, ",")
	}
	return cmd
}

func kinds(sc *Scenario) []string {
	var ks []string
	for _, f := range sc.Faults {
		ks = append(ks, f.Kind)
	}
	return ks
}

func printTable(w io.Writer, sums []*Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\truns\trecords\tviolations\terrors\tseconds\tpeak RSS\tfaults")
	for _, s := range sums {
		var fk []string
		for k, n := range s.Faults {
			fk = append(fk, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(fk)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%d MiB\t%s\n", s.Backend, s.Runs, s.Records, s.Violations, s.Errors, s.Seconds, s.PeakRSSKiB>>10, strings.Join(fk, " "))
	}
	tw.Flush()
	for _, s := range sums {
		for _, f := range s.Failed {
			fmt.Fprintf(w, "\n%s seed %d (%s; faults %s): logs in %s\n", s.Backend, f.Seed, f.Mode, strings.Join(f.Faults, ","), f.Dir)
			if f.Error != "" {
				fmt.Fprintf(w, "  error: %s\n", f.Error)
			}
			for _, v := range f.Violations {
				fmt.Fprintf(w, "  %s: %s\n", v.Kind, v.Detail)
			}
			fmt.Fprintf(w, "  rerun: %s\n", f.Rerun)
			if f.Shrunk != "" {
				fmt.Fprintf(w, "  shrunk: %s\n", f.Shrunk)
			}
		}
	}
}
