package cloudevents_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/cloudevents"
)

type Order struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

func hdrs(kv ...string) []serde.Header {
	var hs []serde.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, serde.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

var binaryHeaders = []string{"ce_specversion", "1.0", "ce_id", "e-1", "ce_source", "/shop", "ce_type", "com.acme.order.created",
	"ce_time", "2026-12-01T12:00:00.5Z", "ce_subject", "o-1", "ce_traceparent", "00-abc-def-01", "content-type", "application/json"}

func TestBinary(t *testing.T) {
	d := cloudevents.NewDeserializer(serde.JSON[Order]())
	m := serde.Meta{Topic: "orders", Part: serde.Value, Headers: hdrs(binaryHeaders...)}
	ev, err := d.Deserialize(context.Background(), m, []byte(`{"id":"o-1","amount":42}`))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 1, 12, 0, 0, 5e8, time.UTC)
	if ev.Mode != cloudevents.Binary || ev.SpecVersion != "1.0" || ev.ID != "e-1" || ev.Source != "/shop" ||
		ev.Type != "com.acme.order.created" || ev.Subject != "o-1" || !ev.Time.Equal(want) ||
		ev.DataContentType != "application/json" || ev.Extensions["traceparent"] != "00-abc-def-01" ||
		!ev.HasData || ev.Data != (Order{ID: "o-1", Amount: 42}) {
		t.Fatalf("%+v", ev)
	}
	// An event without data: a null value.
	ev, err = d.Deserialize(context.Background(), m, nil)
	if err != nil || ev.HasData || ev.Data != (Order{}) {
		t.Fatalf("no data: %+v, %v", ev, err)
	}
}

// TestPipe: decrypt, then CloudEvent, then JSON data.
func TestPipe(t *testing.T) {
	keys := serde.StaticKeys{"k1": make([]byte, 32)}
	enc := serde.AESGCM(keys, serde.EncryptWith("k1"))
	m := &serde.Meta{Topic: "orders", Part: serde.Value, Headers: hdrs(binaryHeaders...)}
	sealed, err := enc.Encode(context.Background(), m, []byte(`{"id":"o-2","amount":7}`))
	if err != nil {
		t.Fatal(err)
	}
	d := serde.Pipe(cloudevents.NewDeserializer(serde.JSON[Order]()), serde.AESGCM(keys))
	ev, err := d.Deserialize(context.Background(), *m, sealed)
	if err != nil || ev.Data.ID != "o-2" || ev.Type != "com.acme.order.created" {
		t.Fatalf("%+v, %v", ev, err)
	}
}

func TestStructured(t *testing.T) {
	d := cloudevents.NewDeserializer(serde.JSON[Order]())
	m := serde.Meta{Topic: "orders", Part: serde.Value, Headers: hdrs("content-type", "application/cloudevents+json; charset=UTF-8")}
	ev, err := d.Deserialize(context.Background(), m, []byte(`{"specversion":"1.0","id":"e-1","source":"/shop",
		"type":"com.acme.order.created","time":"2026-12-01T12:00:00Z","priority":3,"urgent":true,
		"datacontenttype":"application/json","data":{"id":"o-1","amount":42}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Mode != cloudevents.Structured || ev.ID != "e-1" || ev.Extensions["priority"] != "3" || ev.Extensions["urgent"] != "true" ||
		ev.Data != (Order{ID: "o-1", Amount: 42}) || ev.Time.IsZero() {
		t.Fatalf("%+v", ev)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(`{"id":"o-3","amount":1}`))
	ev, err = d.Deserialize(context.Background(), m, []byte(`{"specversion":"1.0","id":"e-2","source":"/shop","type":"t","data_base64":"`+b64+`"}`))
	if err != nil || ev.Data.ID != "o-3" {
		t.Fatalf("data_base64: %+v, %v", ev, err)
	}
	// Text data in a JSON string, handed to a string codec.
	ds := cloudevents.NewDeserializer(serde.String())
	evs, err := ds.Deserialize(context.Background(), m, []byte(`{"specversion":"1.0","id":"e-3","source":"/s","type":"t","datacontenttype":"text/plain","data":"hello"}`))
	if err != nil || evs.Data != "hello" {
		t.Fatalf("text data: %+v, %v", evs, err)
	}
}

// TestInvalid: a missing required attribute, or an event that cannot be
// read, is a permanent error of stage cloudevents naming what is wrong; a
// failure of the data codec keeps the codec's stage.
func TestInvalid(t *testing.T) {
	d := cloudevents.NewDeserializer(serde.JSON[Order]())
	structured := hdrs("content-type", "application/cloudevents+json")
	without := func(name string) []serde.Header {
		var hs []serde.Header
		for _, h := range hdrs(binaryHeaders...) {
			if h.Key != "ce_"+name {
				hs = append(hs, h)
			}
		}
		return hs
	}
	for _, c := range []struct {
		name    string
		headers []serde.Header
		value   string
		missing string // a MissingAttributeError for this attribute
		attr    string // or a FormatError for this one ("" for the whole event)
	}{
		{"a plain record", nil, `{"id":"o"}`, "specversion", ""},
		{"binary without id", without("id"), `{}`, "id", ""},
		{"binary without source", without("source"), `{}`, "source", ""},
		{"binary without type", without("type"), `{}`, "type", ""},
		{"structured without source", structured, `{"specversion":"1.0","id":"e","type":"t"}`, "source", ""},
		{"structured without specversion", structured, `{"id":"e","source":"/s","type":"t"}`, "specversion", ""},
		{"version 0.3", structured, `{"specversion":"0.3","id":"e","source":"/s","type":"t"}`, "", "specversion"},
		{"a bad time", structured, `{"specversion":"1.0","id":"e","source":"/s","type":"t","time":"yesterday"}`, "", "time"},
		{"not JSON", structured, `{"specversion":`, "", ""},
		{"an array", structured, `[1,2]`, "", ""},
		{"null", structured, `null`, "", ""},
		{"an object extension", structured, `{"specversion":"1.0","id":"e","source":"/s","type":"t","x":{"a":1}}`, "", "x"},
		{"a number id", structured, `{"specversion":"1.0","id":7,"source":"/s","type":"t"}`, "", "id"},
		{"data and data_base64", structured, `{"specversion":"1.0","id":"e","source":"/s","type":"t","data":{},"data_base64":"e30="}`, "", ""},
		{"bad base64", structured, `{"specversion":"1.0","id":"e","source":"/s","type":"t","data_base64":"!!"}`, "", "data_base64"},
	} {
		_, err := d.Deserialize(context.Background(), serde.Meta{Topic: "orders", Part: serde.Value, Headers: c.headers}, []byte(c.value))
		stage, _ := serde.StageOf(err)
		ok := err != nil && failure.IsPermanent(err) && stage == "cloudevents" && errors.Is(err, cloudevents.ErrNotCloudEvent)
		if c.missing != "" {
			e, isMissing := errors.AsType[*cloudevents.MissingAttributeError](err)
			ok = ok && isMissing && e.Name == c.missing && deadletter.ErrorType(err) == "*cloudevents.MissingAttributeError"
		} else {
			e, isFormat := errors.AsType[*cloudevents.FormatError](err)
			ok = ok && isFormat && (c.attr == "" || e.Attribute == c.attr)
		}
		if !ok {
			t.Errorf("%s: %v (stage %q, class %v)", c.name, err, stage, failure.Classify(err))
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// A valid event whose data does not decode: the codec's error.
	_, err := d.Deserialize(context.Background(), serde.Meta{Headers: hdrs(binaryHeaders...)}, []byte(`{"id":`))
	if stage, _ := serde.StageOf(err); err == nil || stage != "json" || errors.Is(err, cloudevents.ErrNotCloudEvent) {
		t.Errorf("bad data: %v (stage %q)", err, stage)
	}
	// Hostile attribute values are bounded and printable in errors.
	_, err = d.Deserialize(context.Background(), serde.Meta{Headers: structured},
		[]byte(`{"specversion":"\u001b[2J`+strings.Repeat("x", 10000)+`","id":"e","source":"/s","type":"t"}`))
	if msg := err.Error(); len(msg) > 400 || strings.ContainsRune(msg, 0x1b) {
		t.Errorf("error of %d bytes: %.80q", len(msg), msg)
	}
}
