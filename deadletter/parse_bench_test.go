package deadletter_test

import (
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// BenchmarkParse is the cost of reading one Antidote letter, what dlq ls
// and stats pay per record.
func BenchmarkParse(b *testing.B) {
	now := time.Now()
	f := &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		ErrorType: "*json.SyntaxError", ErrorStage: "json", Message: "unexpected end of JSON input",
		Topic: "orders", Partition: 3, Offset: 8412, Timestamp: now, OriginalHeaders: 1,
		Group: "orders-service", ClientID: "orders-1", Attempts: 1, First: now, Last: now,
	}
	r := deadletter.Record{Topic: "orders.dlq", Key: []byte("order-1"), Value: []byte(`{"id":1`),
		Headers: f.AppendHeaders(hs{h("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")})}
	b.ReportAllocs()
	for b.Loop() {
		l, err := deadletter.Parse(r)
		if err != nil || l.Attempts != 1 {
			b.Fatal(l, err)
		}
	}
}
