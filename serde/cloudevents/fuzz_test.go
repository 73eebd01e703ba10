package cloudevents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/cloudevents"
)

// FuzzDeserialize: any headers (one "key=value" per line) and any value
// must not panic; a failure is always classified, and a decoded event has
// its required attributes.
func FuzzDeserialize(f *testing.F) {
	var bin strings.Builder
	for i := 0; i+1 < len(binaryHeaders); i += 2 {
		bin.WriteString(binaryHeaders[i] + "=" + binaryHeaders[i+1] + "\n")
	}
	f.Add(bin.String(), []byte(`{"id":"o-1","amount":42}`))
	f.Add("content-type=application/cloudevents+json\n", []byte(`{"specversion":"1.0","id":"e","source":"/s","type":"t","data":{"id":"o"}}`))
	f.Add("content-type=application/cloudevents+json\n", []byte(`{"specversion":"1.0","id":"e","source":"/s","type":"t","data_base64":"e30="}`))
	f.Add("content-type=application/cloudevents+json; charset=utf-8\n", []byte(`{"specversion":"1.0","id":"e","source":"/s","type":"t","datacontenttype":"text/plain","data":"x"}`))
	f.Add("", []byte(nil))
	d := cloudevents.NewDeserializer(serde.JSON[Order]())
	f.Fuzz(func(t *testing.T, headers string, value []byte) {
		var hs []serde.Header
		for line := range strings.SplitSeq(headers, "\n") {
			k, v, _ := strings.Cut(line, "=")
			hs = append(hs, serde.Header{Key: k, Value: []byte(v)})
		}
		ev, err := d.Deserialize(context.Background(), serde.Meta{Topic: "t", Part: serde.Value, Headers: hs}, value)
		if err != nil {
			if _, ok := failure.MarkOf(err); !ok && failure.Classify(err) != failure.ClassPermanent {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if ev.SpecVersion != "1.0" || ev.ID == "" || ev.Source == "" || ev.Type == "" {
			t.Fatalf("decoded without its required attributes: %+v", ev)
		}
	})
}
