package bridge

import "sync/atomic"

// Why a connection request was refused.
const (
	refusedNoListener  = iota // nothing listens at the target: REJ
	refusedDialFailed         // the TCP connection failed otherwise
	refusedNoFDs              // out of file descriptors
	refusedMaxConns           // at MaxConns
	refusedNoResources        // QP or registered memory unavailable
	numRefused
)

var refusedNames = [numRefused]string{"no_listener", "dial_failed", "no_fds", "max_sessions", "no_resources"}

// Where a connection failed.
const (
	errQP       = iota // QP or session failure, or an unordered disconnect
	errTCPRead         // reading from the daemon failed (not EOF)
	errTCPWrite        // writing to the daemon failed
	numErrors
)

var errorNames = [numErrors]string{"roce", "tcp_read", "tcp_write"}

// Which side stalled the stream.
const (
	stallTCPWrite = iota // the client's bytes wait for the daemon to take them
	stallRoCESend        // the daemon's bytes wait for the client's ACKs
	numStalls
)

var stallNames = [numStalls]string{"tcp_write", "roce_send"}

// Which way bytes go, for the per-byte costs.
const (
	dirToTCP  = iota // from the RoCE clients to the daemons
	dirToRoCE        // from the daemons to the RoCE clients
	numDirs
)

var dirNames = [numDirs]string{"to_tcp", "to_roce"}

type counters struct {
	accepted, closed atomic.Uint64
	deadPeers        atomic.Uint64
	active           atomic.Int64
	toTCP, toRoCE    atomic.Uint64
	refused          [numRefused]atomic.Uint64
	errors           [numErrors]atomic.Uint64
	stalls           [numStalls]atomic.Uint64
	// The per-byte costs, by direction, counted where they happen: bytes
	// the bridge copies in user space between the sessions' registered
	// buffers and the sockets (the RoCE stack's copy between frames and
	// registered buffers and the kernel's socket copy are not the
	// bridge's, and fixed), the socket system calls the bridge makes,
	// and the hand-offs between its goroutines that may wake one (a
	// channel send to a goroutine that may wait on it, a Wake of the
	// poll loop). Each is added once per call or hand-off, never per
	// byte, so counting costs an uncontended atomic add beside a system
	// call or a channel operation.
	copied, syscalls, wakeups [numDirs]atomic.Uint64
	// The shared pools, published by Poll.
	recvFree, sendFree, registered atomic.Int64
	sendStarved                    atomic.Uint64
}

// Stats is a snapshot of a bridge's counters.
type Stats struct {
	Accepted, Closed uint64
	// DeadPeers counts the connections reaped because their client
	// stopped answering (the QP failed with roce.ErrPeerDead: a vanished
	// guest, a pulled cable, a DREQ lost with all its retries): among
	// Closed and Errors["roce"].
	DeadPeers   uint64
	Active      int64
	BytesToTCP  uint64 // from the RoCE clients to the daemons
	BytesToRoCE uint64 // from the daemons to the RoCE clients
	Refused     map[string]uint64
	Errors      map[string]uint64
	// Stalls count the times a direction started waiting on the other
	// side: the backpressure events.
	Stalls map[string]uint64
	// The per-byte costs, by direction (to_tcp, to_roce): bytes copied in
	// user space between the registered buffers and the sockets, socket
	// system calls made, and goroutine hand-offs that may wake one. With
	// BytesToTCP and BytesToRoCE they give copies per byte, system calls
	// and wake-ups per MiB.
	Copied, Syscalls, Wakeups map[string]uint64
	// The shared buffer pools, as of the last Poll: receive buffers
	// posted on the SRQ (free for any connection), send buffers free,
	// the registered bytes of both pools, and the Sends that found the
	// send pool empty.
	RecvBuffersFree, SendBuffersFree int64
	RegisteredBytes                  int64
	SendPoolEmpty                    uint64
}

func (c *counters) snapshot() Stats {
	s := Stats{Accepted: c.accepted.Load(), Closed: c.closed.Load(), DeadPeers: c.deadPeers.Load(), Active: c.active.Load(),
		BytesToTCP: c.toTCP.Load(), BytesToRoCE: c.toRoCE.Load(),
		Refused: map[string]uint64{}, Errors: map[string]uint64{}, Stalls: map[string]uint64{},
		Copied: map[string]uint64{}, Syscalls: map[string]uint64{}, Wakeups: map[string]uint64{},
		RecvBuffersFree: c.recvFree.Load(), SendBuffersFree: c.sendFree.Load(),
		RegisteredBytes: c.registered.Load(), SendPoolEmpty: c.sendStarved.Load()}
	for i, n := range refusedNames {
		s.Refused[n] = c.refused[i].Load()
	}
	for i, n := range errorNames {
		s.Errors[n] = c.errors[i].Load()
	}
	for i, n := range stallNames {
		s.Stalls[n] = c.stalls[i].Load()
	}
	for i, n := range dirNames {
		s.Copied[n] = c.copied[i].Load()
		s.Syscalls[n] = c.syscalls[i].Load()
		s.Wakeups[n] = c.wakeups[i].Load()
	}
	return s
}
