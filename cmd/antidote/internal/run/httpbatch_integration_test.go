package run

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationRunHTTPBatchPython: antidote run sends a topic in batches
// to a Python service that settles each record in its answer: transient
// results are retried alone (each try counted), a retry delay is honoured,
// permanent results are dead-lettered once with the service's words, and a
// record that makes the service refuse its whole batch is found by trying
// the batch's records alone: only it is dead-lettered. Poison pills never
// reach the service; hostile keys and headers arrive intact; every record
// is accepted or dead-lettered, and the offsets are committed to the end.
func TestIntegrationRunHTTPBatchPython(t *testing.T) {
	base := startService(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "run-batch", 3)
	group := kafkatest.UniqueName("run-batch")
	cl := c.Client(t)

	kinds := []string{"ok", "ok", "transient", "ok", "permanent", "ok", "ok", "poison", "ok", "retry-after", "ok", "ok"}
	const n = 120
	kindOf := map[place]string{}
	idOf := map[place]int{}
	var recs []*kgo.Record
	for i := range n {
		kind := kinds[i%len(kinds)]
		if i == 31 || i == 86 {
			kind = "batch-breaker"
		}
		key := []byte(fmt.Sprintf("key-%d\r\n\x00\xff\"", i))
		hv := []byte(fmt.Sprintf("t=%d, \x00é\r\n", i))
		value, _ := json.Marshal(map[string]any{"id": i, "kind": kind, "key_hex": hex.EncodeToString(key), "header_hex": hex.EncodeToString(hv)})
		if kind == "poison" {
			value = append([]byte("\x00not json "), value...)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: "trace", Value: hv}}})
	}
	// Produced before the start, so that batches fill.
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		pl := place{r.Partition, r.Offset}
		var v struct{ Kind string }
		_ = json.Unmarshal(r.Value, &v)
		kindOf[pl], idOf[pl] = cmpStr(v.Kind, "poison"), i
	}

	dir := t.TempDir()
	cfg := fmt.Sprintf(`kafka:
  brokers: [%s]
pipelines:
  - name: batch
    topics: [%s]
    group: %s
    value: {format: json}
    commit-interval: 500ms
    sink:
      http:
        url: %s/batch
        timeout: 10s
        batch: {size: 10, linger: 50ms}
    policy:
      process:
        transient:
          retry: {initial: 50ms, max: 200ms, attempts: 0}
`, strings.Join(c.Brokers(), ", "), topic, group, base)
	file := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	wantAccepted := map[string]bool{}
	wantDead := map[place]string{}
	for pl, k := range kindOf {
		switch k {
		case "ok", "transient", "retry-after":
			wantAccepted[fmt.Sprint(idOf[pl])] = true
		default:
			wantDead[pl] = k
		}
	}
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	dlq := topic + ".dlq"
	clitest.WaitFor(t, 120*time.Second, "every record accepted or dead-lettered", func() bool {
		s := getStats(t, base)
		return len(s.Accepted) >= len(wantAccepted) && countTopic(t, adm, dlq) >= int64(len(wantDead))
	}, logs.String)
	waitCommittedAtEnd(t, c, group, logs.String, topic)
	if code, out := stop(); code != 0 {
		t.Fatalf("exit %d after the drain\n%s", code, out)
	}

	s := getStats(t, base)
	if len(s.Mismatch) > 0 {
		t.Fatalf("the service saw keys or headers that do not decode to the record's bytes: ids %v", s.Mismatch)
	}
	most := 0
	for _, b := range s.Batches {
		most = max(most, b)
	}
	if most < 2 || most > 10 {
		t.Errorf("batches of at most %d records (%d requests): want batches of 2 to 10", most, len(s.Batches))
	}
	for id := range wantAccepted {
		if s.Accepted[id] < 1 {
			t.Errorf("record %s was not accepted", id)
		}
	}
	for id := range s.Accepted {
		if !wantAccepted[id] {
			t.Errorf("record %s accepted, want it rejected", id)
		}
	}
	for pl, k := range kindOf {
		id := fmt.Sprint(idOf[pl])
		tries := s.Tries[id]
		switch k {
		case "transient":
			// In a batch, then alone: 3 tries of consecutive attempts, from
			// 1 (from 2 when a breaker's batch was refused whole first).
			if !consecutive(tries, 3) {
				t.Errorf("transient record %s: attempts %v, want 3 consecutive from 1 or 2", id, tries)
			}
		case "retry-after":
			if !consecutive(tries, 2) {
				t.Errorf("retry-after record %s: attempts %v, want 2 consecutive from 1 or 2", id, tries)
			}
		case "poison":
			if len(tries) > 0 {
				t.Errorf("poison pill %s reached the service", id)
			}
		}
	}

	letters := readAll(t, c, dlq)
	seen := map[place]bool{}
	for _, r := range letters {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatalf("letter %d/%d: %v", r.Partition, r.Offset, err)
		}
		pl := place{l.OriginalPartition, l.OriginalOffset}
		if seen[pl] {
			t.Errorf("record %v dead-lettered twice", pl)
		}
		seen[pl] = true
		k, ok := wantDead[pl]
		if !ok {
			t.Errorf("record %v (%s) dead-lettered: %s", pl, kindOf[pl], l.Message)
			continue
		}
		wantStage := "process"
		if k == "poison" {
			wantStage = "deserialize-value"
		}
		if l.Stage != wantStage || l.Class != "permanent" {
			t.Errorf("record %v (%s): stage %s class %s, want %s permanent: %s", pl, k, l.Stage, l.Class, wantStage, l.Message)
		}
		if k != "poison" && !strings.Contains(l.Message, "amount must be positive") {
			t.Errorf("record %v (%s): message %q does not hold the service's words", pl, k, l.Message)
		}
	}
	if len(seen) != len(wantDead) {
		t.Errorf("%d records dead-lettered, want %d", len(seen), len(wantDead))
	}
	t.Logf("produced %d = accepted %d + dead-lettered %d, in %d requests of at most %d records (%s)", n, len(s.Accepted), len(seen), len(s.Batches), most, c.Kind())
	if len(s.Accepted)+len(seen) != n {
		t.Fatalf("produced %d, accounted %d", n, len(s.Accepted)+len(seen))
	}
}

// consecutive reports whether tries are n attempts in a row from 1 or 2.
func consecutive(tries []int, n int) bool {
	if len(tries) != n || tries[0] < 1 || tries[0] > 2 {
		return false
	}
	for i := 1; i < n; i++ {
		if tries[i] != tries[i-1]+1 {
			return false
		}
	}
	return true
}

func cmpStr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
