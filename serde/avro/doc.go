// Package avro reads and writes Avro records in the wire format of a
// Confluent-compatible schema registry (Confluent, Apicurio's ccompat API,
// Redpanda, Karapace): a 0x00 magic byte, the schema id as 4 big-endian
// bytes, then the Avro binary encoding. It is a codec for package serde:
// [Deserializer], [Multi] and [Serializer] compose with serde.Pipe, Retry
// and Handle, and plug into consumer.Config.Value.
//
// # Quick start
//
//	reg, err := avro.NewRegistry("https://registry:8081",
//		avro.BasicAuth(key, secret), avro.CAFile("/etc/ssl/registry-ca.pem"))
//	orders, err := avro.NewDeserializer[Order](reg, orderSchema)
//	c, err := consumer.New(consumer.Config[[]byte, Order]{..., Value: orders})
//
// Share one [Registry] per registry in a process: it owns the schema cache
// and the circuit breaker. It wraps the format-neutral client of package
// serde/registry, which the other formats (serde/jsonschema) take:
// give them reg.Registry to share the cache and the breaker.
//
// # Schemas and types
//
// Each record names its writer schema by id. A schema id is immutable, so
// the [Registry] fetches it once per process and keeps it; concurrent
// lookups of one id (four partitions starting at once) share one request.
// The writer schema is resolved to the reader schema given to
// [NewDeserializer] (Avro schema resolution: added fields take their
// defaults, removed ones are skipped, promotions and aliases apply), and
// the record is decoded into a T with hamba/avro v2: a struct with `avro`
// field tags, a map[string]any, or a primitive. Resolution is computed once
// per writer id.
//
// hamba/avro is used because it is the fastest pure-Go Avro library (a
// cached, reflection-free decoder per schema and type), it implements
// writer-to-reader schema resolution (SchemaCompatibility.Resolve), it
// can bound the allocations a corrupt length causes (see Limits), and it decodes
// straight into Go structs without generated code.
//
// # Shared topics
//
// A topic that carries several record types (subjects by record name) is
// read with [Multi]: each [Record] maps a reader schema's full name to a Go
// type, and the decoded value is an any holding that type:
//
//	d, err := avro.NewMulti(reg, avro.Record[Order](orderSchema), avro.Record[Refund](refundSchema))
//	switch v := r.Value.(type) {
//	case Order: ...
//	case Refund: ...
//	}
//
// A writer type with no Go type fails with an [*UnknownTypeError] naming
// the type. It is permanent, so by default the record is dead-lettered. A
// service that only wants some of the types skips the others, counted, with
// the consumer's Skip hook:
//
//	consumer.Config[[]byte, any]{
//		Value: d,
//		Skip:  func(_ deadletter.Stage, err error) bool { return avro.IsUnknownType(err) },
//		...
//	}
//
// # Errors
//
// Every error is a *serde.Error with stage "avro" (serde.StageOf), marked
// with its class (package failure):
//
//	error                   errors.Is            class      when
//	*WireError              ErrNotAvro           permanent  no 0x00 magic byte, or shorter than 5 bytes
//	*UnknownSchemaError     ErrUnknownSchema     permanent  the registry has no such id (40403)
//	*UnknownTypeError       ErrUnknownType       permanent  no Go type for the writer's record type
//	*ResolveError                                permanent  writer schema incompatible with the reader's
//	*SchemaError                                 permanent  registry schema unusable (not Avro, references)
//	*DecodeError                                 permanent  truncated or corrupt Avro
//	*RegistryError          ErrBreakerOpen (*)   transient  unreachable, timeout, 5xx, 429, any other
//	                                                        registry error; (*) breaker open
//
// The permanent types are root causes (they match their sentinel through an
// Is method), so a dead letter's error-type header names them. A registry
// error carries failure.RetryAfter when the registry sent Retry-After (429,
// 503) or the breaker is open; the consumer waits at least that long.
// Registry errors other than "not found" (401, 403, a 404 from a wrong base
// URL) are transient too: a broken dependency must not empty a topic into
// the dead-letter topic.
//
// # Riding out a registry outage
//
// Records whose schema is cached keep decoding while the registry is down.
// Records with an uncached id fail transiently, and the consumer retries
// them in place with backoff: none is dead-lettered. To keep the consumer
// from hammering a registry that is down, the [Registry] has a circuit
// [Breaker]. After [BreakerConfig.Failures] consecutive transient failures
// it opens: lookups fail at once, without a request, with a RetryAfter of
// the time until the next probe. When the probe is due, one lookup goes to
// the registry (half-open) while the others wait for its outcome: one
// request per probe interval, however many partitions and records wait.
// The first success closes the breaker, and everything resumes. Each state
// change is logged; [Breaker.State], [Breaker.OnStateChange],
// [Breaker.Closed] and [Breaker.Wait] let a consumer show the state and
// wake its waiting partitions the moment the registry is back.
//
// The breaker paces the records that wait for it: the failure that opens
// it, every failed probe and every error while it is open carry
// failure.RetryAfter(time until the next probe), so a consumer that honours
// the hint wakes each such record when the probe is due rather than at its
// own, possibly much longer, backoff. When a probe succeeds, a hook wakes
// the rest at once:
//
//	reg.Breaker().OnStateChange(func(_, to avro.State) {
//		if to == avro.Closed {
//			c.WakeRetries()
//		}
//	})
//
// A panic in a registry call (in the HTTP client, or in a transport given
// with [HTTPClient]) is recovered: it is a transient [*RegistryError]
// holding a *serde.PanicError for every caller waiting on that lookup, and
// it counts as a failed call for the breaker, which never stays half-open.
// A panic while parsing a returned schema makes that schema unusable: a
// permanent [*SchemaError].
//
// # Authentication and TLS
//
// [BasicAuth] sets the credentials of managed registries (API key and
// secret); [TLSConfig] and [CAFile] set client certificates and private
// CAs. [Registry.Client] gives the underlying franz-go sr.Client for other
// calls.
//
// # Limits
//
// Schema references, and schema types other than AVRO, are reported as
// [*SchemaError]. Bytes after the end of the Avro record are ignored.
//
// The memory one record can make the decoder allocate is bounded by the
// record's size. Avro writes a length before the data it counts, and the
// Avro library allocates what a length claims before reading the data, so
// a 9-byte poison pill whose array claims eight million strings would cost
// 128 MiB. Here a record of n bytes is decoded with the limit of the first
// size class of 4 KiB, 64 KiB, 1 MiB and 8 MiB that holds it: no array may
// claim more elements, nor any string or bytes value more bytes, than that
// limit (MaxSliceAllocSize and MaxByteSliceSize of hamba/avro), and such a
// claim is a permanent [*DecodeError]. A short poison pill thus allocates
// at most 4096 elements per array, and any record at most its class's
// limit times the size of the Go element type, per level of nesting. Since
// every element and every byte of data takes at least one byte on the
// wire, no valid record is refused. Elements that take no bytes (nulls, a
// fixed of size 0, records of only such fields) would let a few hundred
// bytes of nested arrays claim millions of them: a writer schema with an
// array of them is a permanent [*SchemaError].
package avro
