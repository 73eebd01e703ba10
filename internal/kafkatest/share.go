package kafkatest

import (
	"os"
	"testing"
)

// RequireShareGroups skips t unless the cluster has share groups (KIP-932):
// kfake has them; a real broker has them from Kafka 4.2, where the
// share.version feature is finalized at 1 or more when the storage is
// formatted. In the real-broker pass of CI a broker without them is still
// a skip: KAFKA_VERSION may select an earlier Kafka on purpose.
func (c *Cluster) RequireShareGroups(t testing.TB) {
	t.Helper()
	if !c.Real() {
		return
	}
	resp := c.apiVersions(t)
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "share.version" && f.MaxVersionLevel >= 1 {
			return
		}
	}
	t.Skipf("kafkatest: the broker at %s has no share groups (share.version is not finalized; Kafka 4.2+ has them), KAFKA_VERSION=%s", c.brokers, os.Getenv("KAFKA_VERSION"))
}
