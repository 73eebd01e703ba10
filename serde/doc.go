// Package serde turns record bytes into values, and keeps a bad record from
// stopping a consumer.
//
// It does not depend on any Kafka client: the input of a [Deserializer] is a
// [Meta] (topic, key or value, headers) and the bytes.
//
// # Contract
//
// A [Deserializer] is safe for concurrent use, honours ctx for any waiting,
// and does not keep the bytes it is given: they belong to the caller and are
// valid only during the call. See [Deserializer] for the full contract; a
// [Serializer], a [Stage] and an [EncodeStage] follow the same rules.
//
// # Composing
//
// Small decorators compose, and a chain reads like the sentence it
// implements:
//
//	// Handle failures of Retry-ing transient errors of a Pipe that
//	// decrypts, then decompresses, then decodes JSON.
//	d := serde.Handle(
//		serde.Retry(
//			serde.Pipe(serde.JSON[Order](), serde.AESGCM(keys), serde.Gzip()),
//			backoff.Exponential{Jitter: backoff.JitterFull},
//		),
//	)
//
// The decorators:
//
//   - [Pipe] runs bytes-to-bytes stages in order, then a codec. It is
//     KIP-873's PipeDeserializer. [PipeSerializer] and [PipeCodec] are its
//     twins for writing.
//   - [Retry] retries transient errors under a backoff.Policy, honours ctx
//     and failure.RetryAfter hints, and reports a [*RetryError] with the
//     number of tries and the [StopReason] when it gives up.
//   - [Handle] returns a [Result] that holds either the value or a
//     [*Failure]: the error, its class, the stage that failed and a copy of
//     the raw bytes, everything a dead letter needs.
//   - [Fallback] replaces a failure with a substitute value.
//
// # Built-in codecs and stages
//
// Codecs: [Bytes], [String], [JSON]. Stages: [Gzip] and [Zstd] (with a
// bounded output size against zip bombs, see [MaxSize]), and [AESGCM]
// (decryption with a key chosen by a header, from a [KeySource] such as
// [StaticKeys]). Each has both directions.
//
// # Errors
//
// Every error of a stage or codec is an [*Error] naming the stage ([StageOf]
// reads it). The built-in codecs and stages mark their errors with package
// failure: bytes that cannot be decoded are permanent; a failed key lookup is
// transient. A panic in a stage, a codec or a fallback function is recovered
// and returned as a permanent [*PanicError] with a bounded stack; it never
// crashes the consumer.
//
// Classes follow the deserialize-stage rule: only transient errors are
// retried, and [Handle] records an unclassified error as permanent. When ctx
// is done (shutdown), [Retry] stops and [Handle] returns the error rather
// than a Failure, so that shutdown never sends a record to a dead-letter
// topic.
//
// # Cost
//
// On the success path, Handle(Retry(Pipe(codec))) adds a few indirect calls
// and no allocation to the codec: decorators do not box [Meta], [Result] is
// returned by value, and panic recovery uses open-coded defers.
// BenchmarkChain measures it.
package serde
