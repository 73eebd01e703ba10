package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// avroOrder is the record of examples/orders.avsc.
type avroOrder struct {
	ID          int64   `avro:"id"`
	Customer    string  `avro:"customer"`
	AmountCents int64   `avro:"amount_cents"`
	Note        *string `avro:"note"`
}

// TestIntegrationRunAvro: the Avro example's pipeline, on a schema
// registry: Avro records reach the HTTP service as JSON, resolved to the
// reader schema of examples/orders.avsc; bytes without the magic byte and
// an unknown schema id are dead-lettered and never reach it.
func TestIntegrationRunAvro(t *testing.T) {
	reg := srtest.New(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "run-avro", 2)
	group := kafkatest.UniqueName("run-avro")
	schema, err := os.ReadFile("../../examples/orders.avsc")
	if err != nil {
		t.Fatal(err)
	}
	prod, err := avro.NewRegistry(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	ser, err := avro.NewSerializer[avroOrder](prod, string(schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client(t)
	const n = 40
	want := map[int64]string{}
	poison := 0
	for i := range n {
		var v []byte
		switch i % 10 {
		case 3:
			v = []byte(`{"id": 3, "not": "avro"}`)
			poison++
		case 7:
			v = append(avro.AppendWire(nil, 987654), 2, 4, 6)
			poison++
		default:
			o := avroOrder{ID: int64(i), Customer: fmt.Sprintf("c\"%d\n", i), AmountCents: int64(i * 100)}
			if i%2 == 0 {
				note := "gift é"
				o.Note = &note
			}
			m := serde.Meta{Topic: topic, Part: serde.Value}
			if v, err = ser.Serialize(context.Background(), &m, o); err != nil {
				t.Fatal(err)
			}
			var note any
			if o.Note != nil {
				note = *o.Note // a union of null and a type is its value, or null
			}
			j, _ := json.Marshal(map[string]any{"id": o.ID, "customer": o.Customer, "amount_cents": o.AmountCents, "note": note})
			want[o.ID] = string(j)
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	got := map[int64]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &m) != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		id, _ := m["id"].(float64)
		norm, _ := json.Marshal(m)
		mu.Lock()
		got[int64(id)] = string(norm)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	abs, _ := filepath.Abs("../../examples/orders.avsc")
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
schema-registry:
  url: %s
pipelines:
  - name: avro
    topics: [%s]
    group: %s
    value:
      format: avro
      schema-file: %s
    sink:
      http: {url: %s}
`, strings.Join(c.Brokers(), ", "), reg.URL(), topic, group, abs, srv.URL))
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 120*time.Second, "every Avro record posted and every poison pill dead-lettered", func() bool {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		return k >= len(want) && countTopic(t, adm, topic+".dlq") >= int64(poison)
	}, logs.String)
	waitCommittedAtEnd(t, c, group, logs.String, topic)
	if code, out := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("record %d: posted %s, want %s", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d records posted, want %d", len(got), len(want))
	}
	letters := readAll(t, c, topic+".dlq")
	for _, r := range letters {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if l.Stage != "deserialize-value" || l.Class != "permanent" {
			t.Errorf("letter %d/%d: %s %s %s", l.OriginalPartition, l.OriginalOffset, l.Stage, l.Class, l.Message)
		}
	}
	if len(letters) != poison {
		t.Errorf("%d letters, want %d", len(letters), poison)
	}
}
