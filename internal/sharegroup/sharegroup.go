// Package sharegroup reads what a share group's setup (KIP-932) decides
// about poison pills: its delivery limit, and whether the broker's own
// dead-letter topic of the group (KIP-1191, Kafka 4.4) can keep what the
// broker would dead-letter. The consumer's share mode checks it when a
// member starts, and antidote group describe shows it.
package sharegroup

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config names read by this package.
const (
	GroupLimit     = "share.delivery.count.limit"       // the group's, Kafka 4.3+
	BrokerLimit    = "group.share.delivery.count.limit" // the brokers' default
	GroupDLQ       = "errors.deadletterqueue.topic.name"
	GroupDLQCopy   = "errors.deadletterqueue.copy.record.enable"
	GroupRenew     = "share.renew.acknowledge.enable"
	BrokerDLQ      = "errors.deadletterqueue.topic.name.prefix"
	TopicDLQEnable = "errors.deadletterqueue.group.enable"
)

// DefaultLimit is Kafka's delivery limit when no config sets one.
const DefaultLimit = 5

// DefaultPrefix is the brokers' default prefix of a share group's
// dead-letter topic.
const DefaultPrefix = "dlq."

// Limit is a share group's delivery limit and where it comes from.
type Limit struct {
	Limit int
	// Source is "group" (the group's share.delivery.count.limit),
	// "broker" (the brokers' group.share.delivery.count.limit, the lowest
	// when they differ) or
	// "default" (Kafka's default, 5).
	Source string
}

// ReadLimit reads the delivery limit of group: the group's
// share.delivery.count.limit when it is set for the group (Kafka 4.3+), else
// the brokers' group.share.delivery.count.limit, else Kafka's default.
func ReadLimit(ctx context.Context, cl *kgo.Client, group string) (Limit, error) {
	if gcs, err := GroupConfigs(ctx, cl, group, GroupLimit); err == nil {
		if e, ok := gcs[GroupLimit]; ok && e.Source == kmsg.ConfigSourceGroupConfig && e.Value != nil {
			n, err := parseLimit(*e.Value)
			return Limit{n, "group"}, err
		}
	}
	vs, err := brokerConfig(ctx, cl, BrokerLimit)
	if err != nil {
		return Limit{}, err
	}
	if len(vs) == 0 {
		return Limit{DefaultLimit, "default"}, nil
	}
	// The lowest of the brokers': a record dead-lettered a delivery early
	// is kept; one released on its last delivery is archived and lost.
	l := Limit{Source: "broker"}
	for _, v := range vs {
		n, err := parseLimit(v)
		if err != nil {
			return Limit{}, err
		}
		if l.Limit == 0 || n < l.Limit {
			l.Limit = n
		}
	}
	return l, nil
}

// brokerConfig reads a config of every broker: its value on each that has
// one. A broker's static configs (server.properties) are read only by
// naming the broker: the cluster-wide resource holds the dynamic ones.
func brokerConfig(ctx context.Context, cl *kgo.Client, name string) ([]string, error) {
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, err
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, rc.Err
		}
		for _, e := range rc.Configs {
			if e.Key == name && e.Value != nil {
				out = append(out, *e.Value)
			}
		}
	}
	return out, nil
}

func parseLimit(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("delivery limit %q is not a count", v)
	}
	return n, nil
}

// GroupConfigs reads configs of a group; a name the broker does not know
// (an earlier Kafka) is missing from the result.
func GroupConfigs(ctx context.Context, cl *kgo.Client, group string, names ...string) (map[string]kmsg.DescribeConfigsResponseResourceConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	res.ConfigNames = names
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]kmsg.DescribeConfigsResponseResourceConfig)
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, err
		}
		for _, e := range r.Configs {
			out[e.Name] = e
		}
	}
	return out, nil
}

// Setup is what Check found of a share group's setup.
type Setup struct {
	// DLQTopic is the broker's dead-letter topic of the group
	// (errors.deadletterqueue.topic.name), empty when none is set; then
	// the broker archives a record it would dead-letter (a lock that ran
	// out on its last delivery, a member that died holding it) and it is
	// gone.
	DLQTopic string
	// DLQCopies: its letters hold the record's key and value
	// (errors.deadletterqueue.copy.record.enable); never its headers.
	DLQCopies bool
	// Problems says what would lose records, or the locks of records
	// retried in place, each with what to change.
	Problems []string
}

// Check checks the setup of a share group: the broker's own dead-letter
// topic of the group (Kafka 4.4), which the broker takes under a wrong name
// without complaint and, at write time, only logs "Failed to write to DLQ,
// proceeding to ARCHIVED regardless": the record is gone. The topic must
// exist (the broker creates none by default), start with the brokers'
// prefix ("dlq.") and have the topic config
// errors.deadletterqueue.group.enable=true; without
// errors.deadletterqueue.copy.record.enable=true its letters hold no key or
// value. And share.renew.acknowledge.enable=false, with which a record
// retried in place longer than its lock is delivered again meanwhile.
//
// The error is that of reading the group's configs (an earlier Kafka, no
// DESCRIBE_CONFIGS): then nothing was checked.
func Check(ctx context.Context, cl *kgo.Client, group string) (Setup, error) {
	var s Setup
	gcs, err := GroupConfigs(ctx, cl, group, GroupDLQ, GroupDLQCopy, GroupRenew)
	if err != nil {
		return s, err
	}
	value := func(name string) string {
		if e, ok := gcs[name]; ok && e.Value != nil {
			return *e.Value
		}
		return ""
	}
	if value(GroupRenew) == "false" {
		s.Problems = append(s.Problems, "share.renew.acknowledge.enable is false: a record retried in place longer than its lock (share.record.lock.duration.ms) is delivered again meanwhile; set it to true for the group")
	}
	s.DLQTopic = value(GroupDLQ)
	s.DLQCopies = value(GroupDLQCopy) == "true"
	if s.DLQTopic != "" {
		s.Problems = append(s.Problems, checkDLQ(ctx, cl, s.DLQTopic)...)
		if !s.DLQCopies {
			s.Problems = append(s.Problems, fmt.Sprintf("the broker's dead letters in %s hold no key or value (nor, ever, the original headers); set errors.deadletterqueue.copy.record.enable=true for the group to keep them", s.DLQTopic))
		}
	}
	return s, nil
}

// checkDLQ checks the broker's dead-letter topic of a group and returns what
// is wrong with it.
func checkDLQ(ctx context.Context, cl *kgo.Client, topic string) []string {
	adm := kadm.NewClient(cl)
	lost := "the broker archives a record it cannot dead-letter: it is lost"
	prefix := DefaultPrefix
	if vs, err := brokerConfig(ctx, cl, BrokerDLQ); err == nil && len(vs) > 0 {
		prefix = vs[0]
	}
	var out []string
	if !strings.HasPrefix(topic, prefix) {
		out = append(out, fmt.Sprintf("errors.deadletterqueue.topic.name %q lacks the brokers' prefix %q (errors.deadletterqueue.topic.name.prefix): %s; name a topic that starts with %q", topic, prefix, lost, prefix))
	}
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return out
	}
	if d, ok := details[topic]; !ok || d.Err != nil {
		return append(out, fmt.Sprintf("the broker's dead-letter topic %s (errors.deadletterqueue.topic.name) does not exist: %s; create it with errors.deadletterqueue.group.enable=true", topic, lost))
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return out
	}
	if rc, err := rcs.On(topic, nil); err == nil && rc.Err == nil {
		enabled := false
		for _, e := range rc.Configs {
			if e.Key == TopicDLQEnable && e.Value != nil && *e.Value == "true" {
				enabled = true
			}
		}
		if !enabled {
			out = append(out, fmt.Sprintf("the broker's dead-letter topic %s lacks the topic config errors.deadletterqueue.group.enable=true: %s; set it on the topic", topic, lost))
		}
	}
	return out
}
