package vmm

import (
	"errors"
	"fmt"
)

// ErrInput matches (with errors.Is) every error caused by bad user input: a
// file or flag the user can fix. Its text never appears in messages, which
// stay one clear line.
var ErrInput = errors.New("vmm: bad input")

type inputError struct{ err error }

func (e *inputError) Error() string        { return e.err.Error() }
func (e *inputError) Unwrap() error        { return e.err }
func (e *inputError) Is(target error) bool { return target == ErrInput }

// inputErrorf formats an input error; %w verbs wrap as usual.
func inputErrorf(format string, args ...any) error {
	return &inputError{fmt.Errorf(format, args...)}
}
