package kafkatest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequireCommitsByTopicID skips t unless the cluster's offset commits carry
// topic ids (OffsetCommit v10, Kafka 4.2+; kfake has them). Below that a
// commit goes by topic name, and the broker stores a commit of a deleted
// topic's offsets for a topic created again under the same name: no client
// can tell the two apart, so a test of a topic created again under a
// running consumer cannot reliably pass there.
func (c *Cluster) RequireCommitsByTopicID(t testing.TB) {
	t.Helper()
	if !c.Real() {
		return
	}
	resp := c.apiVersions(t)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == kmsg.OffsetCommit.Int16() && k.MaxVersion >= 10 {
			return
		}
	}
	t.Skipf("kafkatest: the broker at %s commits offsets by topic name (OffsetCommit below v10; Kafka 4.2+ commits by topic id), KAFKA_VERSION=%s", c.brokers, os.Getenv("KAFKA_VERSION"))
}

// apiVersions asks the cluster for its API versions and finalized features.
func (c *Cluster) apiVersions(t testing.TB) *kmsg.ApiVersionsResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "antidote-kafkatest", "0"
	resp, err := req.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatalf("kafkatest: api versions: %v", err)
	}
	return resp
}
