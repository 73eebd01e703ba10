package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Backend is where a run's Kafka lives.
type Backend interface {
	// Brokers are the seed brokers, on loopback.
	Brokers() []string
	// BrokerFault SIGKILLs (kill) or SIGSTOPs (hang) broker node, and
	// restores it after d: kill restarts it on its data directory, hang
	// sends SIGCONT. It returns once the broker is back.
	BrokerFault(ctx context.Context, kind string, node int32, d time.Duration) error
	// Close ends what the backend started for the run.
	Close()
}

// kfakeBackend is an in-process kfake cluster, listening on loopback so
// that the child processes reach it. Each run gets a new one.
type kfakeBackend struct{ c *kfake.Cluster }

func newKfake() (*kfakeBackend, error) {
	// A killed KIP-848 member's partitions move after the broker's session
	// timeout: seconds, not the default 45s.
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.BrokerConfigs(map[string]string{
		"group.consumer.session.timeout.ms":    "6000",
		"group.consumer.heartbeat.interval.ms": "500",
	}))
	if err != nil {
		return nil, err
	}
	return &kfakeBackend{c}, nil
}

func (b *kfakeBackend) Brokers() []string { return b.c.ListenAddrs() }
func (b *kfakeBackend) Close()            { b.c.Close() }
func (b *kfakeBackend) BrokerFault(context.Context, string, int32, time.Duration) error {
	return fmt.Errorf("kfake: no broker faults")
}

// clusterBackend is the three-broker cluster of scripts/kafka.sh cluster,
// shared by the runs: started by the program if it is not running (and then
// stopped at the end), faults through the same script.
type clusterBackend struct {
	script  string
	brokers []string
	started bool
}

// findScript finds scripts/kafka.sh in the working directory or above it.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "kafka.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("scripts/kafka.sh not found in %s or above: run from the repository", dir)
		}
		dir = parent
	}
}

func newCluster(script string, logf func(string, ...any)) (*clusterBackend, error) {
	b := &clusterBackend{script: script}
	out, err := exec.Command(script, "cluster", "status").Output()
	if err != nil {
		logf("starting the three-broker cluster (%s cluster start)", script)
		start := time.Now()
		cmd := exec.Command(script, "cluster", "start")
		cmd.Stderr = os.Stderr
		if out, err = cmd.Output(); err != nil {
			return nil, fmt.Errorf("%s cluster start: %v", script, err)
		}
		b.started = true
		logf("cluster started in %v", time.Since(start).Round(time.Second))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	b.brokers = strings.Split(lines[len(lines)-1], ",")
	return b, nil
}

func (b *clusterBackend) Brokers() []string { return b.brokers }

func (b *clusterBackend) node(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, b.script, append([]string{"cluster"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafka.sh cluster %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (b *clusterBackend) BrokerFault(ctx context.Context, kind string, node int32, d time.Duration) error {
	n := fmt.Sprint(node)
	switch kind {
	case FaultBrokerKill:
		if err := b.node(ctx, "kill", n); err != nil {
			return err
		}
		sleep(ctx, d)
		return b.node(context.Background(), "restart", n) // always restart, even when the run is over
	case FaultBrokerHang:
		if err := b.node(ctx, "hang", n); err != nil {
			return err
		}
		sleep(ctx, d)
		return b.node(context.Background(), "cont", n)
	}
	return fmt.Errorf("unknown broker fault %q", kind)
}

// Close leaves every node running (the next run uses them) and stops the
// cluster only if this program started it; a node left down by a failed
// restart is started again.
func (b *clusterBackend) Close() {}

func (b *clusterBackend) shutdown() {
	if b.started {
		exec.Command(b.script, "cluster", "stop").Run()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
