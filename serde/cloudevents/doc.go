// Package cloudevents reads CloudEvents (version 1.0) from Kafka records,
// as the CloudEvents Kafka protocol binding writes them, and hands their
// data to another deserializer. It is a codec for package serde that
// composes with the others: decrypt, then read the CloudEvent, then decode
// its JSON (or Avro, or Protobuf) data:
//
//	d := serde.Pipe(cloudevents.NewDeserializer(serde.JSON[Order]()), serde.AESGCM(keys))
//	c, err := consumer.New(consumer.Config[[]byte, cloudevents.Event[Order]]{..., Value: d})
//
// # Content modes
//
// Binary mode (the default): the attributes are the record's ce_* headers
// (ce_specversion, ce_id, ce_source, ce_type, ce_time, ...; any other ce_*
// header is an extension), the content-type header is datacontenttype,
// and the value is the data, given as is to the data deserializer. A null
// value is an event without data.
//
// Structured mode, when the content-type header is
// application/cloudevents+json (with or without parameters): the value is
// the event in the JSON event format. Its data member is given to the data
// deserializer as JSON text (or, when datacontenttype is not JSON and data
// is a string, as that string's bytes); data_base64 is given decoded. The
// data deserializer sees the event's datacontenttype as the content-type
// header.
//
// # Errors
//
// A missing required attribute (specversion, id, source, type) is a
// permanent [*MissingAttributeError]; an event that cannot be read (not a
// JSON object, an attribute of the wrong type, a time that is not RFC 3339,
// a specversion other than 1.0, bad base64, both data and data_base64) a
// permanent [*FormatError]. Both match [ErrNotCloudEvent] and have stage
// "cloudevents"; by default such a record is dead-lettered. Errors of the
// data deserializer are returned with their own stage and class. Text from
// the record in an error is made printable and bounded.
//
// This package does not use the CloudEvents Go SDK: the binding is small,
// and the SDK would bring its transports and their dependencies along.
package cloudevents
