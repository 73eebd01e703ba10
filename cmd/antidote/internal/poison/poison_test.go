package poison

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// readTopic reads n records of topic from the start.
func readTopic(t *testing.T, c *kafkatest.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func TestIntegrationPoisonKinds(t *testing.T) {
	c := kafkatest.New(t)
	brokers := strings.Join(c.Brokers(), ",")
	for _, k := range poisonKinds {
		t.Run(k.name, func(t *testing.T) {
			topic := c.Topic(t, "poison-"+k.name, 3)
			const count = 4
			args := []string{"poison", "--brokers", brokers, "--topic", topic, "--kind", k.name,
				"--count", strconv.Itoa(count), "--partition", "2", "--key", "order-42", "-o", "json"}
			size := defaultHugeSize
			if k.name == "huge" {
				size = 5000
				args = append(args, "--size", strconv.Itoa(size))
			}
			code, stdout, stderr := runCmd(t, args...)
			if code != cli.ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var res poisonResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, stdout)
			}
			if res.Topic != topic || res.Kind != k.name || res.Count != count || len(res.Partitions) != 1 ||
				res.Partitions[0] != (poisonPartition{Partition: 2, Count: count, FirstOffset: 0, LastOffset: count - 1}) {
				t.Errorf("summary %+v", res)
			}
			recs := readTopic(t, c, topic, count)
			for _, r := range recs {
				i := int(r.Offset)
				if r.Partition != 2 || string(r.Key) != "order-42" {
					t.Errorf("record %d: partition %d key %q", i, r.Partition, r.Key)
				}
				if want := k.value(i, size); !bytes.Equal(r.Value, want) {
					t.Errorf("record %d: value %q, want %q", i, r.Value, want)
				}
				if len(r.Headers) != 1 || r.Headers[0].Key != poisonHeader || string(r.Headers[0].Value) != k.name {
					t.Errorf("record %d: headers %v", i, r.Headers)
				}
				checkPoisonShape(t, k.name, r.Value, size)
			}
		})
	}
}

// checkPoisonShape checks what makes each kind poison, independently of
// the generator.
func checkPoisonShape(t *testing.T, kind string, v []byte, size int) {
	t.Helper()
	switch kind {
	case "garbage":
		if len(v) < 16 || json.Valid(v) || v[0] == 0 {
			t.Errorf("garbage %x: too short, valid JSON or framed", v)
		}
	case "empty":
		if v == nil || len(v) != 0 {
			t.Errorf("empty: %q (nil %v)", v, v == nil)
		}
	case "huge":
		if len(v) != size || !json.Valid(v) {
			t.Errorf("huge: %d bytes (want %d), valid JSON %v", len(v), size, json.Valid(v))
		}
	case "no-magic":
		if len(v) == 0 || v[0] == 0 {
			t.Errorf("no-magic %x starts with the magic byte", v)
		}
	case "unknown-schema":
		if len(v) < 6 || v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 0x7fffffff {
			t.Errorf("unknown-schema %x", v)
		}
	case "truncated-avro":
		if len(v) < 6 || v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 1 {
			t.Errorf("truncated-avro %x: not framed with schema id 1", v)
		}
	case "bad-json":
		if json.Valid(v) {
			t.Errorf("bad-json %s is valid JSON", v)
		}
	case "wrong-shape-json":
		var o order
		if !json.Valid(v) || json.Unmarshal(v, &o) == nil {
			t.Errorf("wrong-shape-json %s: invalid, or decodes as an Order", v)
		}
	case "truncated-protobuf", "bad-protobuf-indexes":
		_, err := protobufReader(t).Deserialize(context.Background(), serde.Meta{Topic: "t"}, v)
		wantType := map[string]string{"truncated-protobuf": "*protobuf.DecodeError", "bad-protobuf-indexes": "*protobuf.WireError"}[kind]
		if !failure.IsPermanent(err) || deadletter.ErrorType(err) != wantType {
			t.Errorf("%s %x: %v (%s), want a permanent %s", kind, v, err, deadletter.ErrorType(err), wantType)
		}
	case "framed-bad-json", "framed-wrong-shape-json":
		_, err := jsonSchemaReader(t).Deserialize(context.Background(), serde.Meta{Topic: "t"}, v)
		wantType := map[string]string{"framed-bad-json": "*jsonschema.DecodeError", "framed-wrong-shape-json": "*jsonschema.ValidationError"}[kind]
		if !failure.IsPermanent(err) || deadletter.ErrorType(err) != wantType {
			t.Errorf("%s %q: %v (%s), want a permanent %s", kind, v, err, deadletter.ErrorType(err), wantType)
		}
	default:
		t.Errorf("kind %s has no shape check", kind)
	}
}

// poisonRegistry is an in-process registry whose schema id 1 is s, the id
// the framed poison kinds carry.
func poisonRegistry(t *testing.T, s sr.Schema) *registry.Registry {
	t.Helper()
	fake, err := srtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Stop)
	if id := fake.RegisterSchema(t, "poison-value", s); id != 1 {
		t.Fatalf("schema id %d, want 1", id)
	}
	reg, err := registry.New(fake.URL(), registry.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// protobufReader decodes Protobuf written with schema id 1, a
// google.protobuf.StringValue.
func protobufReader(t *testing.T) *protobuf.Deserializer[*wrapperspb.StringValue] {
	t.Helper()
	reg := poisonRegistry(t, sr.Schema{Type: sr.TypeProtobuf,
		Schema: `syntax = "proto3"; package google.protobuf; message StringValue { string value = 1; }`})
	d, err := protobuf.NewDeserializer[*wrapperspb.StringValue](reg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// jsonSchemaReader decodes JSON written with schema id 1, an object schema.
func jsonSchemaReader(t *testing.T) *jsonschema.Deserializer[map[string]any] {
	t.Helper()
	reg := poisonRegistry(t, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"id":{"type":"integer"}}}`})
	d, err := jsonschema.NewDeserializer[map[string]any](reg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestIntegrationPoisonSpread(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "poison-spread", 3)
	code, stdout, stderr := runCmd(t, "poison", "--brokers", strings.Join(c.Brokers(), ","), "--topic", topic, "--kind", "bad-json", "--count", "9")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "Produced 9 bad-json poison pill(s)") || !strings.Contains(stdout, "PARTITION") {
		t.Errorf("table output:\n%s", stdout)
	}
	parts := map[int32]int{}
	for _, r := range readTopic(t, c, topic, 9) {
		parts[r.Partition]++
	}
	if len(parts) != 3 {
		t.Errorf("records without a key spread over %v, want all 3 partitions", parts)
	}
}

func TestIntegrationPoisonErrors(t *testing.T) {
	c := kafkatest.New(t)
	brokers := strings.Join(c.Brokers(), ",")
	missing := kafkatest.UniqueName("no-such-topic")
	code, _, stderr := runCmd(t, "poison", "--brokers", brokers, "--topic", missing, "--kind", "garbage")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, stderr, "topic \""+missing+"\" does not exist")
	if !strings.Contains(stderr, "add --create to create it") || strings.Contains(stderr, "kafka-topics.sh") {
		t.Errorf("no hint to create the topic with this command: %s", stderr)
	}
	code, out, stderr := runCmd(t, "poison", "--brokers", brokers, "--topic", missing, "--kind", "garbage", "--create", "--create-partitions", "2")
	if code != 0 || !strings.Contains(out, "Created topic "+missing) {
		t.Fatalf("poison --create: exit %d\n%s%s", code, out, stderr)
	}
	if n, err := cli.TopicPartitions(context.Background(), kadm.NewClient(c.Client(t)), c.Brokers(), 10*time.Second, missing); err != nil || n != 2 {
		t.Errorf("the created topic has %d partitions (%v), want 2", n, err)
	}

	topic := c.Topic(t, "poison-errors", 2)
	code, _, stderr = runCmd(t, "poison", "--brokers", brokers, "--topic", topic, "--kind", "garbage", "--partition", "5")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, stderr, "has 2 partitions (0-1); partition 5 does not exist")
}

// order has the JSON shape of the demo's orders (demo.Order), which a
// wrong-shape pill must not decode into.
type order struct {
	ID          int    `json:"id"`
	Customer    string `json:"customer"`
	SKU         string `json:"sku"`
	Quantity    int    `json:"quantity"`
	AmountCents int64  `json:"amount_cents"`
}
