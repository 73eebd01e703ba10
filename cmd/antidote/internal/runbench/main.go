// Command runbench measures antidote run pushing a topic to a local HTTP
// service that answers at once, against a bare franz-go program doing the
// same pushes (one POST per record, the value as the body, the topic,
// partition, offset, timestamp and key as headers, the partitions in
// parallel, committing after each poll's records are answered) on the same
// data. Each run is its own process: the antidote binary built from
// ./cmd/antidote with a pipelines file, and this program again, with
// -bare, for the bare program. Both POST to one HTTP server of this
// process, which counts the records; the rate of a run is its records
// over the time from the first request to the last, which leaves out
// process start and group join.
//
//	go run ./cmd/antidote/internal/runbench -brokers 127.0.0.1:39092
//
// With -sink opensearch -opensearch URL, both index the topic into
// OpenSearch instead: antidote run with its opensearch sink, and a bare
// bulk loader on the same client (see opensearch.go).
//
// The target: antidote run reaches at least 80% of the bare program's
// records/s (the median of the per-round ratios).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "seed brokers")
	records := flag.Int("records", 100_000, "records in the topic")
	partitions := flag.Int("partitions", 4, "partitions of the topic")
	valueSize := flag.Int("value-size", 200, "bytes of each value")
	rounds := flag.Int("rounds", 3, "rounds; each runs both programs, the median is reported")
	format := flag.String("format", "bytes", "the format of antidote run's pipeline: bytes, or json (it then also parses each value)")
	bin := flag.String("bin", "", "the antidote binary (default: built from ./cmd/antidote)")
	bare := flag.Bool("bare", false, "run as the bare program (used by the benchmark itself)")
	topic := flag.String("topic", "", "topic (the bare program; default runbench-<records>-<partitions>)")
	group := flag.String("group", "", "group (the bare program)")
	url := flag.String("url", "", "URL to POST to (the bare program)")
	sink := flag.String("sink", "http", "http (a local HTTP service) or opensearch (-opensearch)")
	search := flag.String("opensearch", "", "OpenSearch URL (-sink opensearch)")
	index := flag.String("index", "", "index (the bare program, -sink opensearch)")
	flag.Parse()
	if *topic == "" {
		*topic = fmt.Sprintf("runbench-%d-%d-%d", *records, *partitions, *valueSize)
	}
	if *bare && *sink == "opensearch" {
		if err := runBareBulk(strings.Split(*brokers, ","), *topic, *group, *url, *index); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *bare {
		if err := runBare(strings.Split(*brokers, ","), *topic, *group, *url); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *sink == "opensearch" && (*search == "" || *format == "bytes") {
		log.Fatal("-sink opensearch needs -opensearch URL and -format json")
	}
	if err := bench(*brokers, *topic, *records, *partitions, *valueSize, *rounds, *format, *bin, *search); err != nil {
		log.Fatal(err)
	}
}

// server counts the records POSTed to it.
type server struct {
	mu          sync.Mutex
	n           int
	first, last time.Time
	want        int
	done        chan struct{}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	now := time.Now()
	s.add(1, now)
}

// add counts k records, handed over from start until now.
func (s *server) add(k int, start time.Time) {
	now := time.Now()
	s.mu.Lock()
	if s.n == 0 {
		s.first = start
	}
	had := s.n
	s.n += k
	s.last = now
	if had < s.want && s.n >= s.want {
		close(s.done)
	}
	s.mu.Unlock()
}

func (s *server) reset(want int) {
	s.mu.Lock()
	s.n, s.want, s.done = 0, want, make(chan struct{})
	s.mu.Unlock()
}

func (s *server) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.n-1) / s.last.Sub(s.first).Seconds()
}

func bench(brokers, topic string, records, partitions, valueSize, rounds int, format, bin, search string) error {
	ctx := context.Background()
	if err := fill(ctx, brokers, topic, records, partitions, valueSize); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "runbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "antidote")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/antidote-kafka/antidote/cmd/antidote").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv := &server{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var handler http.Handler = srv
	if search != "" {
		if handler, err = newBulkProxy(search, srv); err != nil {
			return err
		}
	}
	go func() { _ = http.Serve(ln, handler) }()
	url := "http://" + ln.Addr().String() + "/records"
	if search != "" {
		url = "http://" + ln.Addr().String()
	}

	var rates, cpus = map[string][]float64{}, map[string][]float64{}
	var ratios []float64
	for round := 1; round <= rounds; round++ {
		for _, which := range []string{"bare", "antidote"} {
			group := fmt.Sprintf("runbench-%s-%d-%d", which, time.Now().UnixNano(), round)
			index := fmt.Sprintf("runbench-%s-%d", which, round)
			sinkYAML := fmt.Sprintf("http: {url: %s}", url)
			if search != "" {
				if err := searchIndex(search, index); err != nil {
					return err
				}
				sinkYAML = fmt.Sprintf("opensearch: {urls: [%q], index: %q}", url, index)
			}
			var cmd *exec.Cmd
			if which == "bare" && search != "" {
				cmd = exec.Command(self, "-bare", "-sink", "opensearch", "-brokers", brokers, "-topic", topic, "-group", group, "-url", url, "-index", index)
			} else if which == "bare" {
				cmd = exec.Command(self, "-bare", "-brokers", brokers, "-topic", topic, "-group", group, "-url", url)
			} else {
				file := filepath.Join(dir, "run.yaml")
				cfg := fmt.Sprintf(`kafka:
  brokers: [%s]
log: {level: warn}
pipelines:
  - name: bench
    topics: [%s]
    group: %s
    value: {format: %s}
    sink:
      %s
`, brokers, topic, group, format, sinkYAML)
				if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
					return err
				}
				cmd = exec.Command(bin, "run", "-c", file)
			}
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			srv.reset(records)
			start := time.Now()
			if err := cmd.Start(); err != nil {
				return err
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-srv.done:
			case err := <-exited:
				return fmt.Errorf("%s: exited before the last record: %v", which, err)
			case <-time.After(10 * time.Minute):
				_ = cmd.Process.Kill()
				return fmt.Errorf("%s: not done in 10 minutes", which)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			if search != "" {
				dropIndex(search, index)
			}
			r := srv.rate()
			rates[which] = append(rates[which], r)
			var cpu time.Duration
			if st := cmd.ProcessState; st != nil {
				cpu = st.UserTime() + st.SystemTime()
			}
			cpus[which] = append(cpus[which], float64(cpu.Nanoseconds())/1e3/float64(records))
			fmt.Printf("round %d %-8s %8.0f records/s  (%v in all with start and join, %v CPU, %.1f µs CPU/record)\n",
				round, which, r, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(records))
		}
		ratios = append(ratios, rates["antidote"][round-1]/rates["bare"][round-1])
	}
	med := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	spread := func(xs []float64) (lo, hi float64) { return slices.Min(xs), slices.Max(xs) }
	verdict := "PASS"
	if med(ratios) < 0.8 {
		verdict = "MISS"
	}
	into := "a local HTTP service"
	if search != "" {
		into = "OpenSearch at " + search
	}
	fmt.Printf("\n%d records of %d bytes, %d partitions, format %s, into %s, %d rounds\n", records, valueSize, partitions, format, into, rounds)
	for _, w := range []string{"bare", "antidote"} {
		name := map[string]string{"bare": "bare franz-go", "antidote": "antidote run"}[w]
		rlo, rhi := spread(rates[w])
		clo, chi := spread(cpus[w])
		fmt.Printf("%-14s median %8.0f records/s (%.0f to %.0f), CPU %.1f µs/record (%.1f to %.1f)\n", name, med(rates[w]), rlo, rhi, med(cpus[w]), clo, chi)
	}
	fmt.Printf("CPU per record  median ratio antidote/bare %.2f\n", med(cpus["antidote"])/med(cpus["bare"]))
	sort.Float64s(ratios)
	fmt.Printf("ratio          median %.2f (min %.2f, max %.2f), target >= 0.80: %s\n", med(ratios), ratios[0], ratios[len(ratios)-1], verdict)
	return nil
}

// fill creates the topic and produces the records, unless it holds them.
func fill(ctx context.Context, brokers, topic string, records, partitions, valueSize int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		n := int64(0)
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		if n == int64(records) {
			return nil
		}
		if n > 0 {
			return fmt.Errorf("topic %s holds %d records, not %d: delete it", topic, n, records)
		}
	}
	if _, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		return err
	}
	pad := strings.Repeat("x", max(valueSize-60, 0))
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range records {
		v := fmt.Appendf(nil, `{"id":%d,"customer":"c-%d","pad":"%s"}`, i, i%1000, pad)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(strconv.Itoa(i % 1000)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

// runBare is the bare franz-go program: poll, POST each record of each
// partition in order (the partitions in parallel), mark, commit.
func runBare(brokers []string, topic, group, url string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll())
	if err != nil {
		return err
	}
	defer cl.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}, Timeout: 10 * time.Second}
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			break
		}
		var wg sync.WaitGroup
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, r := range p.Records {
					for {
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.Value))
						req.Header["Content-Type"] = []string{"application/octet-stream"}
						req.Header["Antidote-Topic"] = []string{r.Topic}
						req.Header["Antidote-Partition"] = []string{strconv.Itoa(int(r.Partition))}
						req.Header["Antidote-Offset"] = []string{strconv.FormatInt(r.Offset, 10)}
						req.Header["Antidote-Timestamp"] = []string{r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
						req.Header["Antidote-Key"] = []string{string(r.Key)}
						resp, err := hc.Do(req)
						if err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							_ = resp.Body.Close()
							if resp.StatusCode/100 == 2 {
								break
							}
						}
						if ctx.Err() != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}
			}()
		})
		wg.Wait()
		cl.MarkCommitRecords(fs.Records()...)
		cl.AllowRebalance()
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.CommitMarkedOffsets(cctx)
}
