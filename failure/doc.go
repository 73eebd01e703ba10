// Package failure tells transient failures from permanent ones.
//
// A consumer that cannot read or process a record must decide whether trying
// again can help. A schema-registry outage is transient: every record fails,
// and none of them belongs in a dead-letter topic. Corrupt bytes are
// permanent: retrying them only burns CPU. This package gives every error a
// [Class]: [ClassTransient], [ClassPermanent] or [ClassUnclassified].
//
// # Marking
//
// Code that knows tells the retry loop with a mark:
//
//	return failure.Permanent(fmt.Errorf("order %s: no customer", id))
//	return failure.Transient(err)
//	return failure.RetryAfter(30*time.Second, err) // transient, with a hint
//
// A mark is transparent: the marked error has the wrapped error's message and
// unwraps to it, so errors.Is and errors.As keep working. [RetryAfterOf]
// reads the hint and [MarkOf] reads the class of the outermost mark.
//
// # Classifying
//
// [Classify] (the [Default] classifier) decides in this order:
//
//  1. the outermost explicit mark anywhere in the error's tree (wrapped with
//     %w or joined with errors.Join);
//  2. the defaults table below, applied to the tree outermost error first;
//  3. otherwise [ClassUnclassified].
//
// [NewClassifier] builds a [Classifier] whose user [Matcher]s run after the
// marks and before the defaults. Matchers match by sentinel ([Sentinel]), by
// type ([AsType]), by message ([MessageMatches]) or by predicate ([When]):
//
//	c := failure.NewClassifier(
//		failure.Sentinel(sql.ErrNoRows, failure.ClassPermanent),
//		failure.AsType[*pgconn.PgError](failure.ClassTransient),
//		failure.MessageMatches(regexp.MustCompile(`too many connections`), failure.ClassTransient),
//	)
//
// [IsTransient] and [IsPermanent] answer the common question with the default
// classifier.
//
// # Defaults
//
// The defaults only classify what is certain: network-ish failures are
// transient, failures to decode bytes are permanent.
//
//	| error (anywhere in the tree)                          | class        |
//	|-------------------------------------------------------|--------------|
//	| context.DeadlineExceeded                              | transient    |
//	| context.Canceled (see below)                          | transient    |
//	| *net.OpError, *net.DNSError                           | transient    |
//	| syscall ECONNREFUSED, ECONNRESET, ECONNABORTED,       | transient    |
//	|   EPIPE, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH         |              |
//	| net.Error whose Timeout() is true                     | transient    |
//	|   (includes os.ErrDeadlineExceeded)                   |              |
//	| [HTTPStatus] 408, 425, 429, 5xx                       | transient    |
//	| [HTTPStatus] other 4xx, except 401 and 403            | permanent    |
//	| [HTTPStatus] 401, 403 (credentials: an operator's     | unclassified |
//	|   problem), below 400                                 |              |
//	| *json.SyntaxError, *json.UnmarshalTypeError           | permanent    |
//	| base64.CorruptInputError, hex.InvalidByteError,       | permanent    |
//	|   hex.ErrLength                                       |              |
//	| *strconv.NumError, strconv.ErrSyntax, ErrRange        | permanent    |
//	| gzip.ErrHeader, gzip.ErrChecksum, zlib.ErrHeader,     | permanent    |
//	|   zlib.ErrChecksum, zlib.ErrDictionary,               |              |
//	|   flate.CorruptInputError                             |              |
//	| zstd.ErrMagicMismatch, zstd.ErrCRCMismatch and the    | permanent    |
//	|   other klauspost zstd corrupt-input errors           |              |
//	| *[ValidationError]                                    | permanent    |
//	| franz-go broker errors that kerr.IsRetriable reports  | transient    |
//	|   (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...)    |              |
//	| errors from the serde package's codecs and stages     | marked       |
//	|   (they mark themselves; see package serde)           |              |
//	| io.EOF, io.ErrUnexpectedEOF                           | unclassified |
//	| anything else                                         | unclassified |
//
// io.EOF and io.ErrUnexpectedEOF are deliberately left unclassified: from a
// decoder they mean truncated bytes (permanent), from a connection a cut
// stream (transient). Code that knows which should mark them. Broker errors
// that are not retriable (TOPIC_AUTHORIZATION_FAILED, say) are unclassified
// too: whether retrying can help depends on who fixes what.
//
// # Unclassified: the caller decides
//
// [ClassUnclassified] is not an error of this package; it says "no one knows".
// The deserialize stage treats it as permanent, because retrying unreadable
// bytes is what creates infinite loops. The process stage retries it a bounded
// number of times, then dead-letters it.
//
// # context.Canceled
//
// context.Canceled says that someone stopped waiting, usually because the
// consumer is shutting down. It says nothing about the record, and it must
// never send a record to a dead-letter topic. It is classified transient
// (the record may well succeed after a restart) rather than permanent or
// unclassified, both of which lead to a dead letter at the deserialize stage.
// Code that settles records should still check its own context first: when
// ctx is done, stop without settling. The serde decorators do so.
package failure
