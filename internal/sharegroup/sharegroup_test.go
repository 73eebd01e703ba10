package sharegroup_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/sharegroup"
)

// TestReadLimit: the brokers' group.share.delivery.count.limit is read from
// each broker, static and default values included (the cluster-wide
// resource holds only the dynamic ones): a limit of 3 in kfake's configs is
// 3; a real broker (scripts/kafka.sh sets none) answers its own value, 5,
// rather than leaving it to Kafka's default.
func TestReadLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]string
		want sharegroup.Limit
	}{
		{"set", map[string]string{sharegroup.BrokerLimit: "3"}, sharegroup.Limit{Limit: 3, Source: "broker"}},
		{"default", nil, sharegroup.Limit{Limit: 5}},
		{"real", nil, sharegroup.Limit{Limit: 5, Source: "broker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.New(t, kfake.BrokerConfigs(tc.cfg))
			if c.Real() != (tc.name == "real") {
				t.Skip("kfake's configs, or a real broker's")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := sharegroup.ReadLimit(ctx, c.Client(t), kafkatest.UniqueName("g"))
			if err != nil {
				t.Fatal(err)
			}
			if got.Limit != tc.want.Limit || (tc.want.Source != "" && got.Source != tc.want.Source) {
				t.Errorf("ReadLimit = %+v, want %+v", got, tc.want)
			}
		})
	}
}
