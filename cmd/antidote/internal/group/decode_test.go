package group

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// framedBytes is payload in the registry's wire format of schema id.
func framedBytes(id int, payload ...byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), payload...)
}

// groupAt makes a group whose committed offset of topic's partition 0 is off.
func groupAt(t *testing.T, c *kafkatest.Cluster, topic string, off int64) string {
	t.Helper()
	group := kafkatest.UniqueName("decode")
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, off, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(c.Client(t)).CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("committing offset %d for %s: %v", off, group, err)
	}
	return group
}

// TestIntegrationGroupRescueDecodes: with --registry, a key or value in the
// registry's wire format is shown decoded into JSON with its schema
// (Avro, JSON Schema, Protobuf), its text escaped. One that does not decode
// (an unknown schema, a payload its schema does not read, a registry that
// does not answer) is shown as its schema id and preview with why, and the
// rescue goes on. Without --registry the schema id is shown.
func TestIntegrationGroupRescueDecodes(t *testing.T) {
	c := kafkatest.New(t)
	url, reg := clitest.Registry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	register := func(subject, schema string, typ sr.SchemaType) int {
		t.Helper()
		id, err := reg.Register(ctx, subject, sr.Schema{Schema: schema, Type: typ})
		if err != nil {
			t.Fatalf("registering %s: %v", subject, err)
		}
		return id
	}
	const orderAvro = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	keyID := register("orders-key", `"string"`, sr.TypeAvro)
	avroID := register("orders-value", orderAvro, sr.TypeAvro)
	jsonID := register("orders-json-value", `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`, sr.TypeJSON)
	protoID := register("orders-proto-value", "syntax = \"proto3\";\npackage acme;\nmessage Order {\n  int64 id = 1;\n  string item = 2;\n}\n", sr.TypeProtobuf)

	key, err := avro.Marshal(avro.MustParse(`"string"`), "k-1")
	if err != nil {
		t.Fatal(err)
	}
	// The item carries an escape sequence and a C1 control (CSI), which
	// JSON leaves as it is: neither may reach the terminal.
	order, err := avro.Marshal(avro.MustParse(orderAvro), map[string]any{"id": int64(7), "item": "<b>\x1b[31mred\u009b</b>"})
	if err != nil {
		t.Fatal(err)
	}
	// Protobuf: message indexes [0] (one 0 byte), then id=8, item="pen".
	proto := []byte{0, 0x08, 0x08, 0x12, 3, 'p', 'e', 'n'}

	topic := c.Topic(t, "decode", 1)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl,
		&kgo.Record{Topic: topic, Key: framedBytes(keyID, key...), Value: framedBytes(avroID, order...)},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: framedBytes(jsonID, []byte(`{"id": 9, "note": "ok"}`)...)},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: framedBytes(protoID, proto...)},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: framedBytes(999, 0xff, 0xfe)},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: framedBytes(avroID, 0x0e)}, // id 7, then no item
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: framedBytes(jsonID, []byte(`{"note": "no id"}`)...)})

	for _, tc := range []struct {
		name     string
		offset   int64
		registry string
		want     []string
	}{
		{"avro", 0, url, []string{
			`key        "k-1" (Avro, schema id ` + strconv.Itoa(keyID) + ")",
			`value      {"id":7,"item":"<b>\u001b[31mred\u009b</b>"} (Avro, schema id ` + strconv.Itoa(avroID) + ", " + strconv.Itoa(len(order)+5) + " bytes)",
		}},
		{"json schema", 1, url, []string{
			"key        k\n",
			`value      {"id":9,"note":"ok"} (JSON Schema, schema id ` + strconv.Itoa(jsonID) + ", 28 bytes)",
		}},
		{"protobuf", 2, url, []string{
			`value      {"id":"8","item":"pen"} (Protobuf, schema id ` + strconv.Itoa(protoID) + ", 13 bytes)",
		}},
		{"unknown schema", 3, url, []string{
			"value      schema id 999: hex fffe (7 bytes)\n",
			"           not decoded: schema 999: ",
		}},
		{"short payload", 4, url, []string{
			"value      schema id " + strconv.Itoa(avroID) + ": \\x0e (6 bytes)\n",
			"           not decoded: schema " + strconv.Itoa(avroID) + " (Avro): ",
		}},
		{"invalid json", 5, url, []string{
			`value      schema id ` + strconv.Itoa(jsonID) + `: {"note": "no id"} (22 bytes)`,
			"           not decoded: schema " + strconv.Itoa(jsonID) + " (JSON Schema): ",
		}},
		{"registry down", 0, "http://127.0.0.1:1", []string{
			"key        schema id " + strconv.Itoa(keyID) + ": \\x06k-1\n",
			"           not decoded: schema " + strconv.Itoa(keyID) + ": ",
		}},
		{"no registry", 0, "", []string{
			"key        schema id " + strconv.Itoa(keyID) + ": \\x06k-1\n",
			"value      schema id " + strconv.Itoa(avroID) + `: \x0e"<b>\x1b[31mred\u009b</b> (24 bytes)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := groupAt(t, c, topic, tc.offset)
			args := []string{"group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
				"--topic", topic, "--partition", "0", "--yes", "--timeout", "10s"}
			if tc.registry != "" {
				args = append(args, "--registry", tc.registry)
			}
			code, out, errOut := runCmd(t, args...)
			if code != 0 {
				t.Fatalf("rescue: exit %d: %s\n%s", code, errOut, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
			if strings.ContainsAny(out, "\x1b\u009b") {
				t.Errorf("output %q has a control character", out)
			}
			if !strings.Contains(out, "rescued: the record is at "+topic+".dlq") {
				t.Errorf("the rescue did not go on: %q", out)
			}
			if at := committedAt(t, c, group, topic); at != tc.offset+1 {
				t.Errorf("group at %d after the rescue; want %d", at, tc.offset+1)
			}
		})
	}

	code, _, errOut := runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", "g",
		"--topic", topic, "--partition", "0", "--yes", "--registry", " ")
	clitest.CheckOneLineError(t, code, 2, errOut, `--registry " "`)
}
