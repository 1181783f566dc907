package cephrdma

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrBadRecord: the peer sent something that is not a valid QP
	// record, or a record that does not fit the exchange.
	ErrBadRecord = errors.New("cephrdma: bad qp record")
	// ErrGIDMismatch: the GID in the peer's record is not its TCP address.
	ErrGIDMismatch = errors.New("cephrdma: record gid is not the peer's address")
	// ErrUnexpectedData: the peer sent bytes on the TCP connection after
	// the exchange.
	ErrUnexpectedData = errors.New("cephrdma: data on the tcp connection after the exchange")
	// ErrTooManyConns: the stack already holds its maximum of connections.
	ErrTooManyConns = errors.New("cephrdma: too many connections")
	// ErrClosed: the stack or the connection is closed.
	ErrClosed = errors.New("cephrdma: closed")
	// ErrTimeout: a step of the exchange that does not involve TCP (the
	// neighbour resolution) took longer than the I/O timeout.
	ErrTimeout = errors.New("cephrdma: exchange timed out")
)
