package roce

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrWouldBlock: the operation cannot make progress now (the link
	// did not take a frame; for layers above, such as roce/session, no
	// free send buffer or queue slot, no received data); retry after
	// Poll.
	ErrWouldBlock = errors.New("roce: operation would block")
	// ErrInvalidState: the object is not in a state that allows the call.
	ErrInvalidState = errors.New("roce: invalid state")
	// ErrInvalidArgument: an attribute or argument is out of range or not
	// allowed in this transition.
	ErrInvalidArgument = errors.New("roce: invalid argument")
	// ErrQueueFull: the send or receive queue has no free slot.
	ErrQueueFull = errors.New("roce: work queue full")
	// ErrBusy: the object is still in use (a CQ with QPs, a PD with MRs).
	ErrBusy = errors.New("roce: resource busy")
	// ErrNoMemory: an Allocator could not provide the memory asked for.
	ErrNoMemory = errors.New("roce: out of memory")

	// Work completion statuses, returned by WCStatus.Err.

	// ErrLocalLength: a received message did not fit the receive buffers.
	ErrLocalLength = errors.New("roce: local length error")
	// ErrLocalProtection: an SGE names an unknown L_Key, lies outside its
	// memory region or lacks the access the operation needs.
	ErrLocalProtection = errors.New("roce: local protection error")
	// ErrLocalQPOperation: the QP failed for an internal reason (a CQ overrun).
	ErrLocalQPOperation = errors.New("roce: local qp operation error")
	// ErrFlushed: the work request was flushed because the QP is in ERROR.
	ErrFlushed = errors.New("roce: work request flushed")
	// ErrBadResponse: the responder answered with something unexpected.
	ErrBadResponse = errors.New("roce: bad response")
	// ErrRemoteInvalidRequest: the responder NAKed with invalid request.
	ErrRemoteInvalidRequest = errors.New("roce: remote invalid request")
	// ErrRemoteAccess: the responder NAKed with remote access error
	// (wrong R_Key, address out of bounds or access not granted).
	ErrRemoteAccess = errors.New("roce: remote access error")
	// ErrRemoteOperational: the responder NAKed with remote operational error.
	ErrRemoteOperational = errors.New("roce: remote operational error")
	// ErrRetryExceeded: the transport retry count ran out.
	ErrRetryExceeded = errors.New("roce: transport retry count exceeded")
	// ErrPeerDead: the requester's transport timer spent the retry
	// count without a word from the peer, on lost requests or on idle
	// probes (EndpointConfig.IdleProbe): the peer is taken for dead. A
	// QP's error wraps it together with ErrRetryExceeded.
	ErrPeerDead = errors.New("roce: peer not responding")
	// ErrRNRRetryExceeded: the RNR retry count ran out.
	ErrRNRRetryExceeded = errors.New("roce: rnr retry count exceeded")
)
