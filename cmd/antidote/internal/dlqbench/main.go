// Command dlqbench measures antidote dlq on a large dead-letter topic of
// a real broker: it fills the topic with Antidote letters (once; a topic
// that holds them already is reused), then runs the built antidote binary
// and reports, for each command, the wall time, the letters per second
// and the peak resident memory of the process (getrusage maxrss).
//
//	go run ./cmd/antidote/internal/dlqbench -brokers 127.0.0.1:39092 -letters 1000000
//
// The targets: stats in bounded memory (peak RSS under 100 MB whatever the
// topic size) at 200,000 letters/s or more; ls --limit 100 under 1 s.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "seed brokers")
	letters := flag.Int("letters", 1_000_000, "letters in the topic")
	partitions := flag.Int("partitions", 3, "partitions of the topic")
	topic := flag.String("topic", "", "dead-letter topic (default dlqbench-<letters>)")
	bin := flag.String("bin", "", "the antidote binary (default: built from ./cmd/antidote)")
	rounds := flag.Int("rounds", 3, "runs of each command; the median is reported")
	fillOnly := flag.Bool("fill-only", false, "fill the topic and exit (the benchmark runs the fill so)")
	batch := flag.Int("batch", 16<<10, "producer batch size in bytes when filling (16 KiB: the Java client's batch.size; franz-go's is 1 MB)")
	flag.Parse()
	if *topic == "" {
		*topic = fmt.Sprintf("dlqbench-%d-b%d", *letters, *batch)
	}
	if *fillOnly {
		ctx := context.Background()
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ProducerLinger(10*time.Millisecond),
			kgo.ProducerBatchMaxBytes(int32(*batch)), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			log.Fatal(err)
		}
		defer cl.Close()
		if err := fill(ctx, cl, *topic, int32(*partitions), *letters); err != nil {
			log.Fatal(err)
		}
		return
	}
	// The fill runs in a child, so that this process stays small (see
	// runOnce).
	fillCmd := exec.Command(os.Args[0], "-fill-only", "-brokers", *brokers, "-letters", strconv.Itoa(*letters),
		"-partitions", strconv.Itoa(*partitions), "-topic", *topic, "-batch", strconv.Itoa(*batch))
	fillCmd.Stdout, fillCmd.Stderr = os.Stdout, os.Stderr
	if err := fillCmd.Run(); err != nil {
		log.Fatalf("fill: %v", err)
	}
	if *bin == "" {
		dir, err := os.MkdirTemp("", "dlqbench")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		*bin = filepath.Join(dir, "antidote")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/antidote")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			log.Fatalf("go build: %v", err)
		}
	}
	common := []string{"--brokers", *brokers, "--topic", *topic}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("dlqbench: %d letters in %s (%d partitions) on %s; load average %s\n", *letters, *topic, *partitions, *brokers, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Printf("%-36s %9s %10s %12s %10s %11s\n", "command", "wall", "cpu", "letters/s", "first line", "peak RSS")
	for _, c := range []struct {
		name string
		args []string
		all  bool // reads every letter
	}{
		{"dlq stats", []string{"dlq", "stats"}, true},
		{"dlq stats -o json --class permanent", []string{"dlq", "stats", "-o", "json", "--class", "permanent"}, true},
		{"dlq ls --limit 100", []string{"dlq", "ls", "--limit", "100"}, false},
		{"dlq ls -o json (all, to /dev/null)", []string{"dlq", "ls", "-o", "json"}, true},
	} {
		var runs []result
		for range *rounds {
			r, err := runOnce(*bin, append(c.args, common...))
			if err != nil {
				log.Fatalf("%s: %v", c.name, err)
			}
			runs = append(runs, r)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].wall < runs[j].wall })
		m := runs[len(runs)/2]
		rate := "-"
		if c.all {
			rate = fmt.Sprintf("%.0f", float64(*letters)/m.wall.Seconds())
		}
		fmt.Printf("%-36s %9s %10s %12s %10s %8.1f MB\n", c.name, m.wall.Round(time.Millisecond), m.cpu.Round(time.Millisecond), rate, m.first.Round(time.Millisecond), float64(m.maxRSS)/1024)
	}
}

type result struct {
	wall, first, cpu time.Duration
	maxRSS           int64 // KiB
}

// runOnce runs the binary, discarding its output, and measures it.
func runOnce(bin string, args []string) (result, error) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	var first time.Duration
	br := bufio.NewReaderSize(out, 1<<20)
	if _, err := br.ReadByte(); err == nil {
		first = time.Since(start)
	}
	_, _ = io.Copy(io.Discard, br)
	if err := cmd.Wait(); err != nil {
		return result{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	r := result{wall: time.Since(start), first: first}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// getrusage's maxrss of a child counts the parent's resident
		// size at the fork too (Linux keeps the high-water mark across
		// exec): this process stays small, the fill runs in a process
		// of its own.
		r.maxRSS = ru.Maxrss
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return r, nil
}

// fill makes topic hold n letters, producing them unless it already does.
func fill(ctx context.Context, cl *kgo.Client, topic string, partitions int32, n int) error {
	adm := kadm.NewClient(cl)
	if _, ends, err := deadletter.Bounds(ctx, cl, topic); err == nil {
		var have int64
		for _, e := range ends {
			have += e
		}
		if have == int64(n) {
			return nil
		}
		return fmt.Errorf("topic %s holds %d records, not %d: delete it or name another with -topic", topic, have, n)
	} else if !errors.Is(err, deadletter.ErrUnknownTopic) {
		return err
	}
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		return err
	}
	start := time.Now()
	now := time.Now().UTC()
	errc := make(chan error, 1)
	value := []byte(`{"order_id":"ord-000000","customer":"c-1234","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"total":`)
	for i := range n {
		f := &deadletter.Failure{
			Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
			ErrorType: "*json.SyntaxError", ErrorStage: "json", Message: "unexpected end of JSON input",
			Topic: "orders", Partition: int32(i % 12), Offset: int64(i), Timestamp: now,
			OriginalHeaders: 1, Group: "orders-service", ClientID: "orders-1", Attempts: 1, First: now, Last: now,
		}
		if i%10 == 0 {
			f.Stage, f.Reason, f.Class, f.ErrorType, f.Message = deadletter.StageProcess, deadletter.ReasonExhausted, "transient", "*net.OpError", "dial tcp 10.0.0.7:5432: connect: connection refused"
		}
		hs := f.AppendHeaders([]deadletter.Header{{Key: "traceparent", Value: fmt.Appendf(nil, "00-%032x-%016x-01", i, i)}})
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i), Value: value, Headers: make([]kgo.RecordHeader, len(hs))}
		for j, h := range hs {
			r.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
		select {
		case err := <-errc:
			return err
		default:
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	fmt.Printf("dlqbench: produced %d letters in %v\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}
