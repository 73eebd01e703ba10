package consumer

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchView: the view counts the records the client holds by
// partition, and tells whether a partition's broker holds any.
func TestFetchView(t *testing.T) {
	var v fetchView
	recs := func(topic string, part int32, n int) []*kgo.Record {
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: topic, Partition: part, Offset: int64(i)}
		}
		return rs
	}
	a0, a1, b0 := recs("a", 0, 3), recs("a", 1, 2), recs("b", 0, 4)
	v.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: 1}, "a", 0, kgo.FetchBatchMetrics{})
	v.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: 1}, "a", 1, kgo.FetchBatchMetrics{})
	v.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: 2}, "b", 0, kgo.FetchBatchMetrics{})
	for _, rs := range [][]*kgo.Record{a0, a1, b0} {
		for _, r := range rs {
			v.OnFetchRecordBuffered(r)
		}
	}
	if v.held("a", 0) != 3 || v.held("a", 1) != 2 || v.held("b", 0) != 4 || v.held("c", 0) != 0 {
		t.Fatalf("held a/0 %d, a/1 %d, b/0 %d, c/0 %d; want 3, 2, 4, 0", v.held("a", 0), v.held("a", 1), v.held("b", 0), v.held("c", 0))
	}
	for _, r := range append(a0, b0...) {
		v.OnFetchRecordUnbuffered(r, true)
	}
	if v.held("a", 0) != 0 || !v.brokerHolds("a", 0) {
		t.Fatalf("a/0 holds %d, its broker holds records: %v; want 0, true (a/1's)", v.held("a", 0), v.brokerHolds("a", 0))
	}
	if v.brokerHolds("b", 0) {
		t.Fatal("broker 2 holds records after b/0's were polled")
	}
	for _, r := range a1 {
		v.OnFetchRecordUnbuffered(r, false)
	}
	if v.brokerHolds("a", 1) {
		t.Fatal("broker 1 holds records after all were polled or dropped")
	}
}

// BenchmarkFetchView: what the view costs a record fetched and polled.
func BenchmarkFetchView(b *testing.B) {
	var v fetchView
	rs := make([]*kgo.Record, 1000)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: "orders", Partition: int32(i / 250)}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range rs {
			v.OnFetchRecordBuffered(r)
		}
		for _, r := range rs {
			v.OnFetchRecordUnbuffered(r, true)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/record")
}
