package failure

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"strconv"
	"syscall"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
)

// matchDefaults applies the defaults table to err's tree, outermost error
// first: the first node that the table knows decides.
func matchDefaults(err error) (Class, bool) {
	var c Class
	found := walk(err, func(e error) bool {
		var ok bool
		c, ok = defaultNode(e)
		return ok
	})
	return c, found
}

// zstdErrors are the klauspost/compress/zstd sentinels for corrupt or
// oversized input.
var zstdErrors = [...]error{
	zstd.ErrReservedBlockType,
	zstd.ErrCompressedSizeTooBig,
	zstd.ErrBlockTooSmall,
	zstd.ErrUnexpectedBlockSize,
	zstd.ErrMagicMismatch,
	zstd.ErrWindowSizeExceeded,
	zstd.ErrWindowSizeTooSmall,
	zstd.ErrDecoderSizeExceeded,
	zstd.ErrUnknownDictionary,
	zstd.ErrFrameSizeExceeded,
	zstd.ErrFrameSizeMismatch,
	zstd.ErrCRCMismatch,
}

// defaultNode classifies one node of an error tree, ignoring what it wraps.
func defaultNode(e error) (Class, bool) {
	switch e {
	case context.DeadlineExceeded, context.Canceled:
		return ClassTransient, true
	case gzip.ErrHeader, gzip.ErrChecksum, zlib.ErrHeader, zlib.ErrChecksum, zlib.ErrDictionary,
		hex.ErrLength, strconv.ErrSyntax, strconv.ErrRange:
		return ClassPermanent, true
	}
	for _, z := range zstdErrors {
		if e == z {
			return ClassPermanent, true
		}
	}
	switch t := e.(type) {
	case *net.OpError, *net.DNSError:
		return ClassTransient, true
	case syscall.Errno:
		switch t {
		case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
			syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH:
			return ClassTransient, true
		}
		return 0, false
	case *json.SyntaxError, *json.UnmarshalTypeError, base64.CorruptInputError,
		hex.InvalidByteError, flate.CorruptInputError, *strconv.NumError, *ValidationError:
		return ClassPermanent, true
	case HTTPStatus:
		c := StatusClass(t.HTTPStatus())
		return c, c != ClassUnclassified
	case *kerr.Error:
		if t.Retriable {
			return ClassTransient, true
		}
		return 0, false
	case net.Error:
		if t.Timeout() {
			return ClassTransient, true
		}
	}
	return 0, false
}

// StatusClass returns the class of an HTTP response status: 408, 425, 429 and
// 5xx are transient; 401 and 403 (an operator problem: credentials) and
// anything below 400 are unclassified; other 4xx are permanent.
//
// Use it to classify the error type of an HTTP client that does not
// implement [HTTPStatus]:
//
//	failure.When(func(err error) bool { ... }, failure.StatusClass(code))
func StatusClass(code int) Class {
	switch {
	case code == 408 || code == 425 || code == 429 || (code >= 500 && code <= 599):
		return ClassTransient
	case code == 401 || code == 403:
		return ClassUnclassified
	case code >= 400 && code <= 499:
		return ClassPermanent
	default:
		return ClassUnclassified
	}
}
