package admin

import (
	"errors"
	"fmt"
)

// ErrConfig is wrapped by every configuration error of [New] and
// [Handler.Listen]. The message names the offending key.
var ErrConfig = errors.New("admin: invalid config")

func configErr(key, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, key, reason)
}
