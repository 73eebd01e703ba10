package consumer

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
)

// readerOpts are the options of a client that reads a topic on its own
// (the durable attempts, the retry tiers at assignment): the connection of
// the consumer's client (seed brokers, dialer, TLS, SASL, client id,
// versions) and nothing else. The user's ClientOpts are not repeated: their
// hooks (metrics that register themselves, say) belong to one client.
func readerOpts(cl *kgo.Client) []kgo.Opt {
	var opts []kgo.Opt
	if seeds, ok := cl.OptValue(kgo.SeedBrokers).([]string); ok {
		opts = append(opts, kgo.SeedBrokers(seeds...))
	}
	// DialTLSConfig sets a dialer of its own: copy one or the other.
	if t, ok := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); ok && t != nil {
		opts = append(opts, kgo.DialTLSConfig(t))
	} else if d, ok := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); ok && d != nil {
		opts = append(opts, kgo.Dialer(d))
	}
	if ms, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok && len(ms) > 0 {
		opts = append(opts, kgo.SASL(ms...))
	}
	if id, ok := cl.OptValue(kgo.ClientID).(string); ok && id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	if v, ok := cl.OptValue(kgo.MaxVersions).(*kversion.Versions); ok && v != nil {
		opts = append(opts, kgo.MaxVersions(v))
	}
	return opts
}
