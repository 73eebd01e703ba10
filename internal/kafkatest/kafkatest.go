// Package kafkatest hands tests a Kafka cluster: an in-process kfake cluster by
// default, or a real broker when the environment variable ANTIDOTE_KAFKA_BROKERS
// names one (a comma-separated list of host:port). Integration tests written
// against it run unchanged on both.
//
// The project's test command (make test) starts a real Apache Kafka broker with
// scripts/kafka.sh and runs the integration tests a second time with the
// variable set. With CI=true, a missing real broker in that pass is a failure,
// never a skip.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvBrokers names the environment variable that points the tests at a real
// cluster instead of kfake.
const EnvBrokers = "ANTIDOTE_KAFKA_BROKERS"

// Cluster is a running cluster for one test.
type Cluster struct {
	brokers []string
	fake    *kfake.Cluster
	// dial is the dialer of a cluster on an in-memory network (NewVirtual);
	// nil for a cluster on the loopback network.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New returns a cluster for t. Without ANTIDOTE_KAFKA_BROKERS it starts an
// in-process kfake cluster that is closed when t ends. Extra kfake options
// apply only to kfake.
func New(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	if env := strings.TrimSpace(os.Getenv(EnvBrokers)); env != "" {
		c := &Cluster{brokers: strings.Split(env, ",")}
		t.Logf("kafkatest: real Kafka broker at %s", env)
		return c
	}
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}, opts...)
	fc, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: starting kfake: %v", err)
	}
	t.Cleanup(fc.Close)
	return &Cluster{brokers: fc.ListenAddrs(), fake: fc}
}

// NewVirtual returns an in-process kfake cluster on an in-memory network,
// for tests that run in a testing/synctest bubble: a bubble's fake clock
// advances only while every goroutine is blocked on something inside the
// bubble, which a TCP connection is not. Every client of the cluster must
// dial through it: give them ClientOpts (the consumer's Config.ClientOpts)
// or use Client. Call it inside the bubble; the cluster is closed when t
// ends. It never uses a real broker.
func NewVirtual(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	var net kfake.VirtualNetwork
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(9092), kfake.AllowAutoTopicCreation(), kfake.ListenFn(net.Listen)}, opts...)
	fc, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: starting kfake: %v", err)
	}
	t.Cleanup(fc.Close)
	return &Cluster{brokers: fc.ListenAddrs(), fake: fc, dial: net.DialContext}
}

// ClientOpts are the options every client of the cluster needs besides
// its seed brokers: the in-memory dialer of a NewVirtual cluster, none
// otherwise.
func (c *Cluster) ClientOpts() []kgo.Opt {
	if c.dial == nil {
		return nil
	}
	return []kgo.Opt{kgo.Dialer(c.dial)}
}

// Brokers returns the seed brokers.
func (c *Cluster) Brokers() []string { return append([]string(nil), c.brokers...) }

// Real reports whether this is a real broker rather than kfake.
func (c *Cluster) Real() bool { return c.fake == nil }

// Fake returns the kfake cluster, or nil for a real broker. Tests that inject
// faults with ControlKey skip themselves when it is nil.
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// Kind is "kfake" or "kafka", for log lines.
func (c *Cluster) Kind() string {
	if c.Real() {
		return "kafka"
	}
	return "kfake"
}

// Client returns a client on the cluster, closed when t ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.brokers...)}, c.ClientOpts()...), opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Topic creates a topic with a unique name derived from prefix and the given
// number of partitions, and deletes it when t ends.
func (c *Cluster) Topic(t testing.TB, prefix string, partitions int32) string {
	t.Helper()
	name := UniqueName(prefix)
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	c.waitTopic(t, adm, name, partitions)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	return name
}

// waitTopic waits until metadata shows every partition with a leader.
func (c *Cluster) waitTopic(t testing.TB, adm *kadm.Client, name string, partitions int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		md, err := adm.Metadata(ctx, name)
		cancel()
		if err == nil {
			if td, ok := md.Topics[name]; ok && td.Err == nil && int32(len(td.Partitions)) == partitions {
				ready := true
				for _, p := range td.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
					}
				}
				if ready {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: topic %s not ready after 30s (last error: %v)", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// UniqueName returns prefix followed by a random suffix, for topics and groups.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Kcat returns the path of the kcat binary (or kafkacat). It skips t when
// neither is installed, unless CI=true, where it fails: the test command
// installs kcat, so its absence in CI is a broken rig.
func Kcat(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"kcat", "kafkacat"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("kafkatest: kcat not installed (the test command installs it: apt-get install kcat)")
	}
	t.Skip("kafkatest: kcat not installed (apt-get install kcat)")
	return ""
}

// RunKcat runs kcat against the cluster with args and stdin, and returns its
// stdout. It fails t on a non-zero exit and bounds the run to one minute.
func (c *Cluster) RunKcat(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	bin := Kcat(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full := append([]string{"-b", strings.Join(c.brokers, ",")}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Stdin = strings.NewReader(string(stdin))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kafkatest: kcat %s: %v\n%s", strings.Join(full, " "), err, stderr.String())
	}
	return out
}

// String describes the cluster for test logs.
func (c *Cluster) String() string {
	return fmt.Sprintf("%s(%s)", c.Kind(), strings.Join(c.brokers, ","))
}

// The environment variables that name the real test broker's SASL_SSL
// listener (scripts/kafka.sh env prints them).
const (
	EnvSASLBrokers  = "ANTIDOTE_KAFKA_SASL_BROKERS"
	EnvSASLUsername = "ANTIDOTE_KAFKA_SASL_USERNAME"
	EnvSASLPassword = "ANTIDOTE_KAFKA_SASL_PASSWORD"
	EnvTLSCA        = "ANTIDOTE_KAFKA_TLS_CA"
	EnvTLSCert      = "ANTIDOTE_KAFKA_TLS_CERT"
	EnvTLSKey       = "ANTIDOTE_KAFKA_TLS_KEY"
)

// Secured is the SASL_SSL listener of the real test broker: TLS with a
// certificate signed by CAFile, and one user for PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 (OAUTHBEARER takes unsecured tokens for any user). CertFile
// and KeyFile are a client certificate the same authority signed.
type Secured struct {
	Brokers            []string
	Username, Password string
	CAFile             string
	CertFile, KeyFile  string
}

// SecuredListener returns the SASL_SSL listener named by the environment.
// It skips t when the variables are unset, except in the real-broker pass
// of CI (CI=true and ANTIDOTE_KAFKA_BROKERS set), where it fails: there the
// test command exports them.
func SecuredListener(t testing.TB) *Secured {
	t.Helper()
	s := &Secured{
		Username: os.Getenv(EnvSASLUsername), Password: os.Getenv(EnvSASLPassword),
		CAFile: os.Getenv(EnvTLSCA), CertFile: os.Getenv(EnvTLSCert), KeyFile: os.Getenv(EnvTLSKey),
	}
	if b := strings.TrimSpace(os.Getenv(EnvSASLBrokers)); b != "" {
		s.Brokers = strings.Split(b, ",")
	}
	if len(s.Brokers) == 0 || s.Username == "" || s.Password == "" || s.CAFile == "" {
		msg := "kafkatest: no SASL_SSL listener: set " + EnvSASLBrokers + ", " + EnvSASLUsername + ", " + EnvSASLPassword + " and " + EnvTLSCA + " (eval \"$(scripts/kafka.sh env)\")"
		if os.Getenv("CI") == "true" && os.Getenv(EnvBrokers) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Logf("kafkatest: SASL_SSL listener at %s", strings.Join(s.Brokers, ","))
	return s
}
