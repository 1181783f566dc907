package session

import (
	"errors"
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// Sentinel errors; test with errors.Is. A Send or Recv that cannot make
// progress now returns roce.ErrWouldBlock.
var (
	// ErrClosed: the session was closed for sending, or released.
	ErrClosed = errors.New("session: closed")
	// ErrBadCompletion: a session received a work completion it did not
	// expect (error status, wrong opcode, QP or length).
	ErrBadCompletion = errors.New("session: unexpected work completion")
)

// CompletionError reports a work completion a session did not expect.
// It matches ErrBadCompletion and, for an error status, the status's
// sentinel (roce.ErrFlushed, roce.ErrRemoteAccess, ...).
type CompletionError struct {
	QPN    uint32
	Queue  string // "send" or "receive"
	WC     roce.WorkCompletion
	Reason string
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("session: qp %d: %s completion (wr %d, %v, %v, %d bytes): %s",
		e.QPN, e.Queue, e.WC.WRID, e.WC.Status, e.WC.Opcode, e.WC.ByteLen, e.Reason)
}

// Unwrap returns ErrBadCompletion and the status's error, if any.
func (e *CompletionError) Unwrap() []error {
	if err := e.WC.Status.Err(); err != nil {
		return []error{ErrBadCompletion, err}
	}
	return []error{ErrBadCompletion}
}
