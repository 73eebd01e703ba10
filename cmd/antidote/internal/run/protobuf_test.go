package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/protobuf"
)

const shopProto = `syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int64 cents = 2;
  repeated string tags = 3;
}
message Refund {
  string order_id = 1;
}
`

// orderBytes is the Protobuf encoding of shop.Order{id, cents, tags}.
func orderBytes(id string, cents int64, tags ...string) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(cents))
	for _, t := range tags {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	return b
}

// TestIntegrationRunProtobuf: Protobuf values through the registry,
// without generated types: antidote run decodes each record with its writer
// schema into the JSON of its message and forwards it; records that are not
// framed, that name an unknown schema id, or hold another message than
// value.message are dead-lettered at the deserialize stage.
func TestIntegrationRunProtobuf(t *testing.T) {
	reg := srtest.New(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "run-proto", 2)
	out := c.Topic(t, "run-proto-json", 2)
	group := kafkatest.UniqueName("run-proto")
	id := reg.RegisterSchema(t, kafkatest.UniqueName("shop")+"-value", sr.Schema{Type: sr.TypeProtobuf, Schema: shopProto})
	cl := c.Client(t)
	const n = 40
	want := map[string]string{}
	poison := 0
	for i := range n {
		var v []byte
		switch i % 10 {
		case 3:
			v = []byte(`{"id": "not protobuf"}`)
			poison++
		case 5:
			v = append(protobuf.AppendWire(nil, 987654), orderBytes("x", 1)...)
			poison++
		case 7:
			v = append(protobuf.AppendWire(nil, id, 1), protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "o")...) // a shop.Refund
			poison++
		default:
			oid := fmt.Sprintf("o-%d\n\"é", i)
			v = append(protobuf.AppendWire(nil, id), orderBytes(oid, int64(i)*100, "a", "b")...)
			j, _ := json.Marshal(map[string]any{"id": oid, "cents": strconv.Itoa(i * 100), "tags": []string{"a", "b"}})
			want[strconv.Itoa(i)] = string(j)
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
schema-registry: {url: %s}
pipelines:
  - name: proto
    topics: [%s]
    group: %s
    value: {format: protobuf, message: shop.Order}
    sink:
      kafka: {topic: %s, value: decoded}
`, strings.Join(c.Brokers(), ", "), reg.URL(), topic, group, out))
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 120*time.Second, "every record forwarded or dead-lettered", func() bool {
		return countTopic(t, adm, out) >= int64(len(want)) && countTopic(t, adm, topic+".dlq") >= int64(poison)
	}, logs.String)
	waitCommittedAtEnd(t, c, group, logs.String, topic)
	if code, o := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, o)
	}
	for _, r := range readAll(t, c, out) {
		var m any
		if err := json.Unmarshal(r.Value, &m); err != nil {
			t.Fatalf("record %s: not JSON: %q", r.Key, r.Value)
		}
		norm, _ := json.Marshal(m)
		if w := want[string(r.Key)]; string(norm) != w {
			t.Errorf("record %s: %s, want %s", r.Key, norm, w)
		}
		delete(want, string(r.Key))
	}
	if len(want) > 0 {
		t.Errorf("records not forwarded: %v", want)
	}
	letters := readAll(t, c, topic+".dlq")
	for _, r := range letters {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if l.Stage != "deserialize-value" || l.Class != "permanent" {
			t.Errorf("letter of %s: stage %s class %s: %s", r.Key, l.Stage, l.Class, l.Message)
		}
	}
	if len(letters) != poison {
		t.Errorf("%d letters, want %d", len(letters), poison)
	}
}
