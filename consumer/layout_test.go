package consumer

import (
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/serde"
)

// TestHeaderLayout guards the zero-copy conversion in headers().
func TestHeaderLayout(t *testing.T) {
	var k kgo.RecordHeader
	var s serde.Header
	if unsafe.Sizeof(k) != unsafe.Sizeof(s) || unsafe.Offsetof(k.Value) != unsafe.Offsetof(s.Value) {
		t.Fatal("kgo.RecordHeader and serde.Header layouts differ")
	}
	var d deadletter.Header
	if unsafe.Sizeof(k) != unsafe.Sizeof(d) || unsafe.Offsetof(k.Value) != unsafe.Offsetof(d.Value) {
		t.Fatal("kgo.RecordHeader and deadletter.Header layouts differ")
	}
	in := []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}
	out := headers(in)
	if len(out) != 2 || out[0].Key != "a" || string(out[0].Value) != "1" || out[1].Key != "b" {
		t.Fatalf("headers() = %+v", out)
	}
	if headers(nil) != nil {
		t.Fatal("headers(nil) != nil")
	}
}
