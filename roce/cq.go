package roce

import (
	"fmt"
	"sync/atomic"
)

// WCStatus is the status of a work completion.
type WCStatus uint8

// Work completion statuses (the verbs IBV_WC_* subset this transport
// produces).
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocProtErr
	WCWRFlushErr
	WCBadRespErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
)

var wcStatusInfo = [...]struct {
	name string
	err  error
}{
	WCSuccess:        {"success", nil},
	WCLocLenErr:      {"local length error", ErrLocalLength},
	WCLocQPOpErr:     {"local qp operation error", ErrLocalQPOperation},
	WCLocProtErr:     {"local protection error", ErrLocalProtection},
	WCWRFlushErr:     {"work request flushed", ErrFlushed},
	WCBadRespErr:     {"bad response", ErrBadResponse},
	WCRemInvReqErr:   {"remote invalid request", ErrRemoteInvalidRequest},
	WCRemAccessErr:   {"remote access error", ErrRemoteAccess},
	WCRemOpErr:       {"remote operational error", ErrRemoteOperational},
	WCRetryExcErr:    {"transport retry exceeded", ErrRetryExceeded},
	WCRNRRetryExcErr: {"rnr retry exceeded", ErrRNRRetryExceeded},
}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusInfo) {
		return wcStatusInfo[s].name
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Err returns the sentinel error for s (ErrFlushed, ErrRemoteAccess, ...),
// or nil for WCSuccess.
func (s WCStatus) Err() error {
	if int(s) < len(wcStatusInfo) {
		return wcStatusInfo[s].err
	}
	return ErrBadResponse
}

// WCOpcode says which operation a work completion is for.
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend WCOpcode = iota
	WCRDMAWrite
	WCRDMARead
	WCRecv            // a SEND (with or without immediate) arrived
	WCRecvRDMAWithImm // an RDMA WRITE with immediate arrived
)

var wcOpcodeNames = [...]string{"send", "rdma-write", "rdma-read", "recv", "recv-rdma-with-imm"}

func (o WCOpcode) String() string { return enumName(wcOpcodeNames[:], o, "opcode") }

// WCFlags qualify a work completion.
type WCFlags uint8

// WCWithImm: Imm holds the immediate data of the message.
const WCWithImm WCFlags = 1

// WorkCompletion reports the outcome of a work request.
type WorkCompletion struct {
	WRID    uint64 // the work request's ID
	Status  WCStatus
	Opcode  WCOpcode // meaningful only when Status is WCSuccess
	Flags   WCFlags
	ByteLen uint32 // receives: bytes placed; READ: bytes read; else the request's length
	Imm     uint32
	QPN     uint32 // the local QP
	SrcQP   uint32 // the remote QP
}

// EventType identifies an asynchronous event.
type EventType uint8

// Asynchronous events.
const (
	// EventCommEstablished: the first packet arrived on a QP in RTR (the
	// connection manager may treat the connection as established).
	EventCommEstablished EventType = iota + 1
	// EventQPFatal: the QP went to ERROR because of a transport error;
	// Err says which.
	EventQPFatal
	// EventCQOverrun: a completion was lost because the CQ was full; the
	// QPs that produced it were moved to ERROR.
	EventCQOverrun
)

var eventNames = [...]string{EventCommEstablished: "comm-established", EventQPFatal: "qp-fatal", EventCQOverrun: "cq-overrun"}

func (t EventType) String() string { return enumName(eventNames[:], t, "event") }

// Event is an asynchronous event on a QP or CQ.
type Event struct {
	Type EventType
	QPN  uint32 // the QP concerned (for CQ events: the QP whose completion was lost)
	Err  error  // the cause, for EventQPFatal and EventCQOverrun
}

// CQConfig configures a completion queue.
type CQConfig struct {
	// Depth is the number of completions the queue holds.
	Depth int
	// OnCompletion, if set, is called from Poll after completions were
	// added to the queue since the previous call (once per Poll at most).
	OnCompletion func(cq *CQ)
	// OnEvent, if set, receives the CQ's asynchronous events (overrun),
	// from Poll.
	OnEvent func(ev Event)
}

// CQ is a completion queue: a bounded ring of work completions.
type CQ struct {
	ep           *Endpoint
	ring         []WorkCompletion
	head, n      int
	onCompletion func(*CQ)
	onEvent      func(Event)
	notifyQueued bool // on the endpoint's notify list
	users        int  // QPs using it
	destroyed    bool
	depth        atomic.Int64 // n, published for metrics
}

// MaxCQDepth bounds CQConfig.Depth.
const MaxCQDepth = 1 << 20

// NewCQ creates a completion queue on e.
func (e *Endpoint) NewCQ(cfg CQConfig) (*CQ, error) {
	if cfg.Depth < 1 || cfg.Depth > MaxCQDepth {
		return nil, fmt.Errorf("roce: create cq of depth %d: %w", cfg.Depth, ErrInvalidArgument)
	}
	return &CQ{
		ep:           e,
		ring:         make([]WorkCompletion, cfg.Depth),
		onCompletion: cfg.OnCompletion,
		onEvent:      cfg.OnEvent,
	}, nil
}

// Poll moves up to len(wc) completions, oldest first, into wc and returns
// how many.
func (cq *CQ) Poll(wc []WorkCompletion) int {
	k := 0
	for k < len(wc) && cq.n > 0 {
		wc[k] = cq.ring[cq.head]
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
		cq.n--
		k++
	}
	if k > 0 {
		cq.depth.Store(int64(cq.n))
	}
	return k
}

// Len returns the number of completions waiting.
func (cq *CQ) Len() int { return cq.n }

// Cap returns the queue's depth.
func (cq *CQ) Cap() int { return len(cq.ring) }

// Destroy releases the queue; no QP may still use it.
func (cq *CQ) Destroy() error {
	if cq.users > 0 {
		return fmt.Errorf("roce: destroy cq used by %d qps: %w", cq.users, ErrBusy)
	}
	cq.destroyed = true
	return nil
}

// push appends wc; it reports false when the queue is full and the
// completion was lost.
func (cq *CQ) push(wc *WorkCompletion) bool {
	if cq.n == len(cq.ring) {
		return false
	}
	i := cq.head + cq.n
	if i >= len(cq.ring) {
		i -= len(cq.ring)
	}
	cq.ring[i] = *wc
	cq.n++
	cq.depth.Store(int64(cq.n))
	if cq.onCompletion != nil && !cq.notifyQueued {
		cq.notifyQueued = true
		cq.ep.notify = append(cq.ep.notify, cq)
	}
	return true
}
