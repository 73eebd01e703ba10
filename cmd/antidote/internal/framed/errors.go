package framed

import "errors"

// ErrNotFramed is returned by [Decoder.Decode] for bytes that are not in
// the wire format: shorter than its 5-byte header, or a first byte other
// than the magic byte 0.
var ErrNotFramed = errors.New("not in the schema registry's wire format (no magic byte 0 and schema id)")
