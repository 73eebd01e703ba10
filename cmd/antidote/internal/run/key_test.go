package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

const keySchema = `{"type":"record","name":"OrderKey","fields":[{"name":"region","type":"string"},{"name":"id","type":"long"}]}`

type orderKey struct {
	Region string `avro:"region"`
	ID     int64  `avro:"id"`
}

// TestIntegrationRunKeyFormat: with key.format, the key is decoded too: an
// Avro key through the registry reaches the sink as JSON, a null key stays
// null, and a key that does not decode is dead-lettered at the key's
// stage, its record never reaching the sink.
func TestIntegrationRunKeyFormat(t *testing.T) {
	reg := srtest.New(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "run-key", 2)
	out := c.Topic(t, "run-key-out", 2)
	group := kafkatest.UniqueName("run-key")
	prod, err := avro.NewRegistry(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	ser, err := avro.NewSerializer[orderKey](prod, keySchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client(t)
	const n = 30
	want := map[string]string{} // value -> the key's JSON ("null" for a null key)
	poison := 0
	for i := range n {
		value := []byte(fmt.Sprintf(`{"n":%d}`, i))
		var key []byte
		switch i % 10 {
		case 4:
			key = []byte("not avro") // poison: the key does not decode
			poison++
		case 7:
			want[string(value)] = "null" // a null key
		default:
			m := serde.Meta{Topic: topic, Part: serde.Key}
			k := orderKey{Region: "eu\"" + strconv.Itoa(i%3), ID: int64(i)}
			if key, err = ser.Serialize(context.Background(), &m, k); err != nil {
				t.Fatal(err)
			}
			j, _ := json.Marshal(map[string]any{"region": k.Region, "id": k.ID})
			want[string(value)] = string(j)
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: key, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.avsc"), []byte(keySchema), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`kafka:
  brokers: [%s]
schema-registry: {url: %s}
pipelines:
  - name: keys
    topics: [%s]
    group: %s
    key: {format: avro, schema-file: key.avsc}
    value: {format: json}
    sink:
      kafka: {topic: %s, value: decoded}
`, strings.Join(c.Brokers(), ", "), reg.URL(), topic, group, out)), 0o600); err != nil {
		t.Fatal(err)
	}
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 120*time.Second, "every record forwarded or dead-lettered", func() bool {
		return countTopic(t, adm, out) >= int64(len(want)) && countTopic(t, adm, topic+".dlq") >= int64(poison)
	}, logs.String)
	if code, o := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, o)
	}
	for _, r := range readAll(t, c, out) {
		got := "null"
		if r.Key != nil {
			var m any
			if err := json.Unmarshal(r.Key, &m); err != nil {
				t.Fatalf("key of %s: not JSON: %q", r.Value, r.Key)
			}
			b, _ := json.Marshal(m)
			got = string(b)
		}
		if w, ok := want[string(r.Value)]; !ok || got != w {
			t.Errorf("record %s: key %s, want %s", r.Value, got, w)
		}
		delete(want, string(r.Value))
	}
	if len(want) > 0 {
		t.Errorf("not forwarded: %v", want)
	}
	letters := readAll(t, c, topic+".dlq")
	for _, r := range letters {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if l.Stage != "deserialize-key" || string(r.Key) != "not avro" {
			t.Errorf("letter of key %q: stage %s: %s", r.Key, l.Stage, l.Message)
		}
	}
	if len(letters) != poison {
		t.Errorf("%d letters, want %d", len(letters), poison)
	}
}

// TestKeyFormatConfig: key takes the value's formats without stages.
func TestKeyFormatConfig(t *testing.T) {
	base := "kafka:\n  brokers: [127.0.0.1:9092]\npipelines:\n  - name: p\n    topics: [t]\n    group: g\n    KEY\n    value: {format: json}\n    sink:\n      kafka: {topic: out, value: decoded}\n"
	for _, tc := range []struct{ key, want string }{
		{"key: {format: jsno}", `pipelines[0].key.format: "jsno" is not one of`},
		{"key: {format: avro}", "pipelines[0].key.format: avro reads schemas from a registry"},
		{"key: {format: string, stages: [{type: gzip}]}", "pipelines[0].key.stages: a key is decoded by its format alone"},
		{"key: {formt: json}", "pipelines[0].key.formt: unknown key (did you mean format?)"},
	} {
		_, err := parseRunFile("f.yaml", []byte(strings.Replace(base, "KEY", tc.key, 1)), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.key, err, tc.want)
		}
	}
	file := clitest.WriteFile(t, "key.yaml", strings.Replace(base, "KEY", "key: {format: string}", 1))
	code, out, errOut := runCmd(t, "run", "--check", "-c", file)
	if code != 0 || !strings.Contains(out, "string (a null key stays null)") {
		t.Errorf("--check: exit %d\n%s%s\nwant the key's line", code, out, errOut)
	}
}
