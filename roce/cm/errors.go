package cm

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned and passed to callbacks wrap them;
// test with errors.Is.
var (
	// ErrRejected: the peer (or this Manager, for an AcceptFunc error)
	// rejected the connection with a REJ; the error is a *RejectError.
	ErrRejected = errors.New("cm: connection rejected")
	// ErrTimeout: the peer did not answer a REQ, REP or DREQ in time.
	ErrTimeout = errors.New("cm: timed out")
	// ErrDisconnected: the peer disconnected before the connection was
	// established.
	ErrDisconnected = errors.New("cm: disconnected by peer")
	// ErrCanceled: Disconnect was called before the connection was
	// established.
	ErrCanceled = errors.New("cm: connection attempt canceled")
	// ErrQPFailed: the connection's QP went to ERROR (a transport error,
	// the retry limit) or was destroyed; the error also wraps the QP's
	// cause, such as roce.ErrRetryExceeded.
	ErrQPFailed = errors.New("cm: qp failed")
	// ErrStale: the peer sent a new REQ from the QP of this established
	// connection, so its side of this one is gone.
	ErrStale = errors.New("cm: connection replaced by a new request from the same peer qp")
	// ErrDeferred, returned by an AcceptFunc, defers the answer to a REQ:
	// the application answers later with Manager.Complete.
	ErrDeferred = errors.New("cm: accept deferred")
	// ErrTooManyConns: Config.MaxConns connections exist.
	ErrTooManyConns = errors.New("cm: too many connections")
	// ErrPortInUse: Listen on a port already listened on.
	ErrPortInUse = errors.New("cm: port already in use")
	// ErrNotListening: Unlisten on a port not listened on.
	ErrNotListening = errors.New("cm: port not listened on")
	// ErrQueueFull: Do found the command queue full.
	ErrQueueFull = errors.New("cm: command queue full")
	// ErrInvalidArgument: an argument is out of range.
	ErrInvalidArgument = errors.New("cm: invalid argument")
	// ErrInvalidState: the connection or QP is not in a state that allows
	// the call.
	ErrInvalidState = errors.New("cm: invalid state")
)

// REJ reasons (IBA table 109; Linux enum ib_cm_rej_reason).
const (
	RejNoQP                 = 1
	RejNoResources          = 3
	RejTimeout              = 4
	RejUnsupported          = 5
	RejInvalidCommID        = 6
	RejInvalidServiceID     = 8
	RejInvalidTransportType = 9
	RejStaleConn            = 10
	RejInvalidGID           = 12
	RejInvalidMTU           = 26
	RejConsumerDefined      = 28
)

// RejectReasonString names a REJ reason.
func RejectReasonString(r uint16) string {
	switch r {
	case RejNoQP:
		return "no qp"
	case RejNoResources:
		return "no resources"
	case RejTimeout:
		return "timeout"
	case RejUnsupported:
		return "unsupported request"
	case RejInvalidCommID:
		return "invalid comm id"
	case RejInvalidServiceID:
		return "invalid service id"
	case RejInvalidTransportType:
		return "invalid transport type"
	case RejStaleConn:
		return "stale connection"
	case RejInvalidGID:
		return "invalid gid"
	case RejInvalidMTU:
		return "invalid mtu"
	case RejConsumerDefined:
		return "consumer defined"
	}
	return fmt.Sprintf("reason %d", r)
}

// RejectError is a REJ: received from the peer (Events.Connected gets
// one), or returned by an AcceptFunc (see Reject) to choose what the
// Manager sends. It matches ErrRejected.
type RejectError struct {
	Reason uint16 // Rej* code
	// ARI is the additional rejection information (for RejTimeout, the
	// sender's CA GUID).
	ARI []byte
	// PrivateData is the REJ's private data (up to 148 bytes; a received
	// REJ carries all 148, zero-padded).
	PrivateData []byte
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("cm: connection rejected: %s (%d)", RejectReasonString(e.Reason), e.Reason)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// Reject returns the error an AcceptFunc returns to reject a request
// with reason (RejConsumerDefined for an application decision) and up to
// 148 bytes of private data.
func Reject(reason uint16, privateData []byte) error {
	return &RejectError{Reason: reason, PrivateData: privateData}
}
