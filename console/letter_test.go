package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// oneLetter produces one Antidote letter with value v and an original
// header, and returns the cluster and topic.
func oneLetter(t *testing.T, v []byte) (*kafkatest.Cluster, string) {
	t.Helper()
	c := kafkatest.New(t)
	dlq := c.Topic(t, "one.dlq", 1)
	f := &deadletter.Failure{Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		Message: "bad", Topic: "orders", OriginalHeaders: 1}
	hs := kafkatest.Headers(f.AppendHeaders([]deadletter.Header{{Key: "email", Value: []byte("ada@example.com")}}))
	kafkatest.Produce(t, c.Client(t, kgo.ProducerBatchMaxBytes(1<<20)), &kgo.Record{Topic: dlq, Key: []byte("customer-42"), Value: v, Headers: hs})
	return c, dlq
}

// TestIntegrationHideValues: keys, values and original header values are
// shown as size and SHA-256, nowhere as themselves.
func TestIntegrationHideValues(t *testing.T) {
	v := []byte(`{"name":"Ada Lovelace"}`)
	c, dlq := oneLetter(t, v)
	base := newServer(t, c, console.Config{HideValues: true})
	sum := sha256.Sum256(v)
	for _, path := range []string{"/topics/" + dlq, "/topics/" + dlq + "/letters/0/0", "/topics/" + dlq + "/letters/0/0?as=hex&full=1"} {
		code, body, _ := get(t, base+path, true)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		for _, secret := range []string{"Ada Lovelace", "customer-42", "ada@example.com", "416461"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %q with HideValues", path, secret)
			}
		}
		if strings.Contains(path, "letters") && !strings.Contains(body, "hidden: 23 bytes, sha256 "+hex.EncodeToString(sum[:])) {
			t.Errorf("%s: no size and hash of the value", path)
		}
		if !strings.Contains(body, "values hidden") {
			t.Errorf("%s: no sign that values are hidden", path)
		}
	}
}

// TestIntegrationLargeValue: a 1 MB value is cut for display, with a
// "show all" that shows it whole.
func TestIntegrationLargeValue(t *testing.T) {
	v := []byte(strings.Repeat("0123456789", 100_000)) // 1 MB
	c, dlq := oneLetter(t, v)
	base := newServer(t, c, console.Config{})
	code, body, _ := get(t, base+"/topics/"+dlq+"/letters/0/0", true)
	if code != 200 || !strings.Contains(body, "show-all") {
		t.Fatalf("letter: %d, no show all", code)
	}
	if len(body) > 200<<10 {
		t.Errorf("the page of a 1 MB value is %d bytes, want it cut", len(body))
	}
	code, body, _ = get(t, base+"/topics/"+dlq+"/letters/0/0?as=text&full=1", true)
	if code != 200 || len(body) < 1_000_000 || strings.Contains(body, "show-all") {
		t.Errorf("show all: %d, %d bytes", code, len(body))
	}
	if code, _, _ := get(t, base+"/topics/"+dlq+"/letters/0/1", true); code != 404 {
		t.Errorf("a letter past the end: %d, want 404", code)
	}
	if code, _, _ := get(t, base+"/topics/no-such-topic.dlq/letters/0/0", true); code != 404 {
		t.Errorf("a letter of a topic that does not exist: %d, want 404", code)
	}
}
