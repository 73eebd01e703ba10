package consumer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// What an operator sees and does on a share-group member: the records it
// retries in place show in Stats.Stuck, and Skip and DeadLetter end their
// retries as they do for a partition. A share-group member owns no
// partition: Pause and Resume refuse.

// stick shows rec as retrying in place (Stats.Stuck), cancel ending its
// wait when an operator skips or dead-letters it.
func (s *shareSource[K, V]) stick(rec *kgo.Record, attempts int, first time.Time, err error, cancel context.CancelCauseFunc) {
	k := tpo{tp{rec.Topic, rec.Partition}, rec.Offset}
	s.mu.Lock()
	s.retrying[k] = &stuck{offset: rec.Offset, reason: StuckRetrying, attempts: attempts, since: first, lastErr: err, cancel: cancel}
	s.mu.Unlock()
}

// unstick ends what stick showed: rec is being settled.
func (s *shareSource[K, V]) unstick(rec *kgo.Record) {
	s.mu.Lock()
	delete(s.retrying, tpo{tp{rec.Topic, rec.Partition}, rec.Offset})
	s.mu.Unlock()
}

// stuckOn returns the records retrying in place.
func (s *shareSource[K, V]) stuckOn() []Stuck {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Stuck, 0, len(s.retrying))
	for k, st := range s.retrying {
		o := Stuck{Topic: k.topic, Partition: k.partition, Offset: k.offset, Reason: st.reason, Attempts: st.attempts, Since: st.since}
		if st.lastErr != nil {
			o.LastError = deadletter.Truncate(st.lastErr.Error(), deadletter.MaxMessageBytes)
		}
		out = append(out, o)
	}
	return out
}

// operate ends the retries of the record at topic/part/offset with cause:
// errSkipped, or an *operatorLetter.
func (s *shareSource[K, V]) operate(topic string, part int32, offset int64, cause error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.retrying[tpo{tp{topic, part}, offset}]; st != nil {
		st.cancel(cause)
		return nil
	}
	var offs []int64
	for k := range s.retrying {
		if k.topic == topic && k.partition == part {
			offs = append(offs, k.offset)
		}
	}
	slices.Sort(offs)
	on := make([]string, len(offs))
	for i, off := range offs {
		on[i] = strconv.FormatInt(off, 10)
	}
	if len(on) == 0 {
		return fmt.Errorf("%w: share group %s: this member retries no record of %s/%d", ErrNotStuck, s.group, topic, part)
	}
	return fmt.Errorf("%w: share group %s: this member retries %s/%d offsets %s, not %d", ErrNotStuck, s.group, topic, part, strings.Join(on, ", "), offset)
}

// ownsNone is the error of Pause and Resume on a share-group member.
func (s *shareSource[K, V]) ownsNone(topic string, part int32) error {
	return fmt.Errorf("%w: %s/%d: a member of share group %s acquires records from the group's partitions and owns none to pause; stop the member, and the others take its share",
		ErrNotAssigned, topic, part, s.group)
}
