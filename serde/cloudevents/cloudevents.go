package cloudevents

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// Mode is the content mode of a CloudEvent in a Kafka record.
type Mode uint8

const (
	// Binary: the attributes are ce_* headers, the data is the value.
	Binary Mode = iota
	// Structured: the value is the whole event, in the JSON event format
	// (content-type application/cloudevents+json).
	Structured
)

// String returns "binary" or "structured".
func (m Mode) String() string {
	if m == Structured {
		return "structured"
	}
	return "binary"
}

// HeaderPrefix is the prefix of the attribute headers in binary mode.
const HeaderPrefix = "ce_"

// ContentType is the media type of a structured-mode event.
const ContentType = "application/cloudevents+json"

// Event is a CloudEvent (version 1.0) whose data was decoded into a T.
type Event[T any] struct {
	// Required attributes.
	SpecVersion string
	ID          string
	Source      string
	Type        string
	// Optional attributes; zero when absent.
	Subject         string
	Time            time.Time
	DataContentType string
	DataSchema      string
	// Extensions are the other attributes, by name.
	Extensions map[string]string
	// Data is the decoded data, zero if the event has none.
	Data T
	// HasData reports whether the event had data.
	HasData bool
	// Mode is the content mode the event was read in.
	Mode Mode
}

// Deserializer reads CloudEvents from Kafka records, in both content modes
// of the CloudEvents Kafka protocol binding, and decodes their data with
// another deserializer. It implements serde.Deserializer[Event[T]] and is
// safe for concurrent use.
type Deserializer[T any] struct {
	data serde.Deserializer[T]
	name string
}

// NewDeserializer returns a deserializer of CloudEvents whose data is
// decoded by data (serde.JSON[T](), an Avro or Protobuf deserializer, ...).
// It reads the value of a record; as a [serde.Pipe] codec it comes after
// the stages that decrypt or decompress the value:
//
//	serde.Pipe(cloudevents.NewDeserializer(serde.JSON[Order]()), serde.AESGCM(keys))
func NewDeserializer[T any](data serde.Deserializer[T]) *Deserializer[T] {
	name := "data"
	if n, ok := data.(interface{ Name() string }); ok {
		name = n.Name()
	}
	return &Deserializer[T]{data: data, name: name}
}

// Name returns "cloudevents", the stage name in errors and dead-letter
// headers. Errors of the data deserializer keep its own stage name.
func (*Deserializer[T]) Name() string { return stage }

// Deserialize reads a CloudEvent: in structured mode when the record's
// content-type header is application/cloudevents+json (parameters such as
// charset allowed), in binary mode otherwise. A missing required attribute
// is a permanent [*MissingAttributeError], an unreadable event a permanent
// [*FormatError]; the data deserializer's errors are returned as they are,
// with their class.
func (d *Deserializer[T]) Deserialize(ctx context.Context, m serde.Meta, data []byte) (Event[T], error) {
	var a attrs
	var payload []byte
	var err error
	if structured(m) {
		a, payload, err = readStructured(data)
	} else {
		a, payload, err = readBinary(m, data)
	}
	if err == nil {
		err = a.validate()
	}
	if err != nil {
		return Event[T]{}, &serde.Error{Stage: stage, Part: m.Part, Err: failure.Permanent(err)}
	}
	ev := Event[T]{SpecVersion: a.specversion, ID: a.id, Source: a.source, Type: a.typ, Subject: a.subject,
		Time: a.time, DataContentType: a.contentType, DataSchema: a.dataSchema, Extensions: a.ext,
		HasData: a.hasData, Mode: a.mode}
	if !a.hasData {
		return ev, nil
	}
	// The data deserializer sees the event's content type in the
	// content-type header, as in binary mode.
	dm := m
	if a.mode == Structured {
		ct := a.contentType
		if ct == "" {
			ct = "application/json"
		}
		dm.Headers = append(m.Headers[:len(m.Headers):len(m.Headers)], serde.Header{Key: "content-type", Value: []byte(ct)})
	}
	v, err := d.data.Deserialize(ctx, dm, payload)
	if err != nil {
		if _, ok := errors.AsType[*serde.Error](err); !ok {
			err = &serde.Error{Stage: d.name, Part: m.Part, Err: err}
		}
		return Event[T]{}, err
	}
	ev.Data = v
	return ev, nil
}

// attrs are the attributes of an event, as read.
type attrs struct {
	specversion, id, source, typ, subject, contentType, dataSchema string
	timeText                                                       string
	time                                                           time.Time
	ext                                                            map[string]string
	hasData                                                        bool
	mode                                                           Mode
}

// set stores attribute name; other names are extensions.
func (a *attrs) set(name, value string) {
	switch name {
	case "specversion":
		a.specversion = value
	case "id":
		a.id = value
	case "source":
		a.source = value
	case "type":
		a.typ = value
	case "subject":
		a.subject = value
	case "time":
		a.timeText = value
	case "dataschema":
		a.dataSchema = value
	case "datacontenttype":
		a.contentType = value
	default:
		if a.ext == nil {
			a.ext = make(map[string]string)
		}
		a.ext[name] = value
	}
}

// validate checks the required attributes and parses the time.
func (a *attrs) validate() error {
	switch {
	case a.specversion == "":
		return &MissingAttributeError{Name: "specversion", Mode: a.mode}
	case a.specversion != "1.0":
		return &FormatError{Attribute: "specversion", Reason: "version " + strconv.Quote(clean(a.specversion)) + " is not supported, want 1.0", Mode: a.mode}
	case a.id == "":
		return &MissingAttributeError{Name: "id", Mode: a.mode}
	case a.source == "":
		return &MissingAttributeError{Name: "source", Mode: a.mode}
	case a.typ == "":
		return &MissingAttributeError{Name: "type", Mode: a.mode}
	}
	if a.timeText != "" {
		t, err := time.Parse(time.RFC3339Nano, a.timeText)
		if err != nil {
			return &FormatError{Attribute: "time", Reason: "not RFC 3339: " + strconv.Quote(clean(a.timeText)), Mode: a.mode}
		}
		a.time = t
	}
	return nil
}

// structured reports whether the record is a structured-mode event.
func structured(m serde.Meta) bool {
	ct, ok := m.Header("content-type")
	if !ok {
		return false
	}
	mt, _, err := mime.ParseMediaType(string(ct))
	return err == nil && mt == ContentType
}

// readBinary reads the ce_* headers and content-type; the value is the
// data (none if the value is null). The last of repeated headers wins.
func readBinary(m serde.Meta, data []byte) (attrs, []byte, error) {
	a := attrs{mode: Binary, hasData: data != nil}
	for _, h := range m.Headers {
		if len(h.Key) > len(HeaderPrefix) && strings.EqualFold(h.Key[:len(HeaderPrefix)], HeaderPrefix) {
			name := strings.ToLower(h.Key[len(HeaderPrefix):])
			if name == "datacontenttype" {
				continue // content-type carries it in binary mode
			}
			a.set(name, string(h.Value))
		} else if strings.EqualFold(h.Key, "content-type") {
			a.contentType = string(h.Value)
		}
	}
	return a, data, nil
}

// readStructured reads an event in the JSON event format.
func readStructured(data []byte) (attrs, []byte, error) {
	a := attrs{mode: Structured}
	formatErr := func(attr, reason string) (attrs, []byte, error) {
		return attrs{}, nil, &FormatError{Attribute: attr, Reason: reason, Mode: Structured}
	}
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&members); err != nil {
		return formatErr("", "not a JSON object: "+clean(err.Error()))
	}
	if dec.More() {
		return formatErr("", "data after the JSON object")
	}
	if members == nil {
		return formatErr("", "not a JSON object: null")
	}
	rawData, hasData := members["data"]
	rawB64, hasB64 := members["data_base64"]
	for name, raw := range members {
		if name == "data" || name == "data_base64" {
			continue
		}
		v, err := scalar(raw)
		if err != nil {
			return formatErr(clean(name), err.Error())
		}
		if contextAttrs[name] && bytes.TrimSpace(raw)[0] != '"' {
			return formatErr(name, "not a JSON string")
		}
		a.set(name, v)
	}
	switch {
	case hasData && hasB64:
		return formatErr("", "both data and data_base64")
	case hasB64:
		var s string
		if err := json.Unmarshal(rawB64, &s); err != nil {
			return formatErr("data_base64", "not a JSON string")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return formatErr("data_base64", "not base64: "+clean(err.Error()))
		}
		a.hasData = true
		return a, b, nil
	case hasData && !bytes.Equal(bytes.TrimSpace(rawData), []byte("null")):
		a.hasData = true
		// A string holds the data itself when the content type is not JSON.
		var s string
		if a.contentType != "" && !isJSON(a.contentType) && json.Unmarshal(rawData, &s) == nil {
			return a, []byte(s), nil
		}
		return a, rawData, nil
	}
	return a, nil, nil
}

// contextAttrs are the attributes the specification defines, all strings
// in the JSON event format.
var contextAttrs = map[string]bool{"specversion": true, "id": true, "source": true, "type": true,
	"subject": true, "time": true, "datacontenttype": true, "dataschema": true}

// scalar returns a JSON string, number or boolean as text.
func scalar(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errors.New("not a JSON string")
		}
		return s, nil
	case '{', '[':
		return "", errors.New("an object or array, want a string, number or boolean")
	case 'n':
		return "", errors.New("null, want a string, number or boolean")
	}
	return string(raw), nil // a number or a boolean, as written
}

// isJSON reports whether a media type is JSON (application/json, or a
// +json suffix).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// clean makes text from a record safe for an error message: valid UTF-8,
// no control characters, at most 256 bytes.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > 256 {
		cut := 256
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

var _ serde.Deserializer[Event[struct{}]] = (*Deserializer[struct{}])(nil)
