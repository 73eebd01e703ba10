package kafkatest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationKcatToFranz proves the rig: bytes produced by a foreign
// client (kcat, librdkafka) are read back byte for byte by a franz-go consumer,
// on kfake or on the real broker the environment names.
func TestIntegrationKcatToFranz(t *testing.T) {
	c := kafkatest.New(t)
	t.Logf("cluster: %s", c)
	topic := c.Topic(t, "kcat", 3)

	// A poison pill as kcat sends it: not UTF-8, no magic byte, an embedded NUL.
	value := []byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0xff, '{', '"'}
	file := filepath.Join(t.TempDir(), "pill.bin")
	if err := os.WriteFile(file, value, 0o600); err != nil {
		t.Fatal(err)
	}
	c.RunKcat(t, nil, "-P", "-t", topic, "-p", "2", "-k", "order-17", "-H", "source=kcat", file)

	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record from kcat within 30s: %v", err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v", tp, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		r := recs[0]
		if r.Partition != 2 || string(r.Key) != "order-17" || !bytes.Equal(r.Value, value) {
			t.Fatalf("got partition %d key %q value %x; want 2 %q %x", r.Partition, r.Key, r.Value, "order-17", value)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "kcat" {
			t.Fatalf("headers = %+v, want source=kcat", r.Headers)
		}
		return
	}
}
