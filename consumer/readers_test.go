package consumer

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

type countHook struct{}

func (countHook) OnBrokerConnect(kgo.BrokerMetadata, time.Duration, net.Conn, error) {}

// TestReaderOpts: the clients that read the attempts and the retry tiers
// connect like the consumer's client (TLS, SASL, client id) but do not get
// its hooks: a metrics hook registers itself once.
func TestReaderOpts(t *testing.T) {
	tc := &tls.Config{ServerName: "kafka.example.com"}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.DialTLSConfig(tc),
		kgo.SASL(plain.Auth{User: "u", Pass: "p"}.AsMechanism()), kgo.ClientID("billing"), kgo.WithHooks(countHook{}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r, err := kgo.NewClient(readerOpts(cl)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.OptValue(kgo.DialTLSConfig).(*tls.Config); got == nil || got.ServerName != "kafka.example.com" {
		t.Errorf("TLS config %v", got)
	}
	if n := len(r.OptValues(kgo.SASL)); n == 0 {
		t.Error("no SASL mechanism")
	}
	if id := r.OptValue(kgo.ClientID).(string); id != "billing" {
		t.Errorf("client id %q", id)
	}
	if seeds := r.OptValue(kgo.SeedBrokers).([]string); len(seeds) != 1 || seeds[0] != "127.0.0.1:1" {
		t.Errorf("seeds %v", seeds)
	}
	if hs := r.OptValue(kgo.WithHooks); hs != nil {
		if h, ok := hs.([]kgo.Hook); ok && len(h) > 0 {
			t.Errorf("the reader got the consumer's hooks: %v", h)
		}
	}
}
