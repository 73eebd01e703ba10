// Package registry is the client of a Confluent-compatible schema registry
// (Confluent, Apicurio's ccompat API, Redpanda, Karapace) shared by the
// codecs of serde/avro, serde/jsonschema and serde/protobuf: schemas cached by id,
// concurrent lookups of one id deduplicated, registrations cached, and a
// circuit [Breaker] that paces the records waiting for the registry.
//
// Create one [Registry] per registry in a process and give it to every
// codec: the cache and the breaker are its. avro.NewRegistry returns one
// wrapped for Avro; its Registry field is this type.
//
// # Errors
//
//	error                 errors.Is          class      when
//	*UnknownSchemaError   ErrUnknownSchema   permanent  the registry has no such id (40403)
//	*RegistryError        ErrBreakerOpen (*) transient  unreachable, timeout, 5xx, 429, any other
//	                                                    registry error; (*) breaker open
//
// A registry error carries failure.RetryAfter when the registry sent
// Retry-After (429, 503) or when the breaker is open after it: the time
// until the next probe. A panic in a registry call (in the HTTP client, or
// in a transport given with [HTTPClient]) is a transient *RegistryError
// holding a *serde.PanicError, and a failed call for the breaker.
//
// # The circuit breaker
//
// After [BreakerConfig.Failures] consecutive transient failures the breaker
// opens: lookups of uncached ids fail at once, without a request. When the
// probe is due, one lookup goes to the registry (half-open) while the
// others wait for its outcome: one request per probe interval, however many
// partitions and records wait. The failure that opens it, every failed
// probe and every error while it is open carry failure.RetryAfter(time
// until the next probe), so a consumer that honours the hint wakes each
// waiting record when the probe is due, not at its own backoff. The first
// success closes the breaker; [Breaker.OnStateChange] lets the consumer
// wake everything at once (consumer.Consumer.WakeRetries).
package registry
