package roce

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// QPState is the state of a queue pair.
type QPState uint8

// QP states. The send-queue-drain states SQD and SQE are not supported:
// nothing here drains a send queue on request.
const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR // ready to receive: the responder runs
	QPStateRTS // ready to send: requester and responder run
	QPStateError
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "ERROR"}

func (s QPState) String() string { return enumName(qpStateNames[:], s, "state") }

// Limits of QP capabilities and attributes.
const (
	MaxQueueDepth = 1 << 16 // MaxSendWR, MaxRecvWR
	MaxSGE        = 16      // MaxSendSGE, MaxRecvSGE
	MaxRdAtomic   = 16      // MaxRdAtomic, MaxDestRdAtomic
	// MaxTimerCode is the largest 5-bit timer code: MinRNRTimer and
	// Timeout are 0..MaxTimerCode.
	MaxTimerCode = 31
	// MaxRetry is the largest RetryCnt and RNRRetry; it means unlimited.
	MaxRetry   = 7
	MaxMessage = 1 << 31 // bytes in one message
	// maxMessagePSNs bounds the packets of one message (and the window),
	// keeping every PSN comparison far inside the half-space window.
	maxMessagePSNs = 1 << 21
)

// QPCap sizes a QP's queues.
type QPCap struct {
	MaxSendWR  int // send queue slots
	MaxRecvWR  int // receive queue slots
	MaxSendSGE int // SGEs per send work request (1 if 0)
	MaxRecvSGE int // SGEs per receive work request (1 if 0)
}

// QPInitAttr describes a QP to create. Only reliable connected QPs exist.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	Cap            QPCap
	// SigAll makes every send work request signaled.
	SigAll bool
	// OnEvent, if set, receives the QP's asynchronous events, from Poll.
	OnEvent func(ev Event)
	// NoRNR makes the responder drop a request that finds no receive
	// posted without answering, instead of sending an RNR NAK. For peers
	// that treat an RNR NAK as fatal (Ceph's rdma_cm clients ask for
	// rnr_retry 0). Once a receive is ready again, one PSN sequence NAK
	// for the dropped request has the requester resend it at once rather
	// than on its transport timer (about a second under rdma_cm): it
	// costs one of the requester's retries, which progress restores.
	// With an SRQ, an empty SRQ counts as no receive posted.
	NoRNR bool
	// SRQ, if set, is the shared receive queue the QP takes its receives
	// from; Cap.MaxRecvWR and MaxRecvSGE are then ignored and PostRecv on
	// the QP fails.
	SRQ *SRQ
}

// AddressVector says how to reach the remote QP: what goes into the
// Ethernet, IP and UDP headers of every packet.
type AddressVector struct {
	DstMAC [6]byte
	DstIP  netip.Addr // the remote GID as an IPv4 (or IPv6) address
	SrcIP  netip.Addr // the local address; the endpoint's when invalid
	TOS    uint8      // IPv4 TOS / IPv6 traffic class (verbs traffic_class)
	TTL    uint8      // IPv4 TTL / IPv6 hop limit (verbs hop_limit); 64 if 0
	UDPSrc uint16     // UDP source port; udpSourcePort(qpn) if 0, as rxe
	// VLANs are the VLAN tags to send with, outermost first: those the
	// peer's frames came in (wire.Packet.VLANs), or none.
	VLANs header.VLANs
}

// QPAttrMask selects the fields of a QPAttr that Modify applies.
type QPAttrMask uint32

// Attribute mask bits.
const (
	QPAttrState           QPAttrMask = 1 << iota
	QPAttrAccessFlags                // Access: remote operations the QP accepts
	QPAttrAV                         // AV
	QPAttrPathMTU                    // PathMTU
	QPAttrDestQPN                    // DestQPN
	QPAttrRQPSN                      // RQPSN
	QPAttrMaxDestRdAtomic            // MaxDestRdAtomic
	QPAttrMinRNRTimer                // MinRNRTimer
	QPAttrSQPSN                      // SQPSN
	QPAttrTimeout                    // Timeout
	QPAttrRetryCnt                   // RetryCnt
	QPAttrRNRRetry                   // RNRRetry
	QPAttrMaxRdAtomic                // MaxRdAtomic
)

// QPAttr holds the attributes Modify sets and Query reports.
type QPAttr struct {
	State QPState
	// Access is the set of remote operations the QP accepts
	// (AccessRemoteWrite, AccessRemoteRead); regions must grant them too.
	Access  Access
	AV      AddressVector
	PathMTU int    // bytes: 256, 512, 1024, 2048 or 4096
	DestQPN uint32 // remote QP number
	RQPSN   uint32 // first PSN expected from the remote requester
	SQPSN   uint32 // first PSN this requester sends
	// MaxRdAtomic bounds the READs this requester has outstanding;
	// MaxDestRdAtomic those the responder accepts. 0..MaxRdAtomic.
	MaxRdAtomic, MaxDestRdAtomic int
	// MinRNRTimer is the timer code (0..31, see wire.RNRDelay) the
	// responder puts in its RNR NAKs.
	MinRNRTimer uint8
	// Timeout is the retransmit timeout code: 4.096 µs · 2^Timeout, 0 for
	// no timer (0..31).
	Timeout uint8
	// RetryCnt and RNRRetry (0..7) are the retries after a timeout or
	// sequence NAK and after an RNR NAK; 7 means unlimited.
	RetryCnt, RNRRetry uint8
}

// Transitions and the attributes each requires and allows (IBA 11.2.4.2,
// trimmed to what this transport uses).
var transitions = map[[2]QPState]struct{ required, optional QPAttrMask }{
	{QPStateReset, QPStateInit}: {0, QPAttrAccessFlags},
	{QPStateInit, QPStateInit}:  {0, QPAttrAccessFlags},
	{QPStateInit, QPStateRTR}: {QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN,
		QPAttrAccessFlags | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
	{QPStateRTR, QPStateRTS}: {QPAttrSQPSN,
		QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxRdAtomic},
	{QPStateRTS, QPStateRTS}: {0,
		QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxRdAtomic},
}

// WROpcode is the operation of a send work request.
type WROpcode uint8

// Send work request opcodes.
const (
	WRSend WROpcode = iota
	WRSendWithImm
	WRRDMAWrite
	WRRDMAWriteWithImm
	WRRDMARead
)

var wrOpcodeNames = [...]string{"send", "send-with-imm", "rdma-write", "rdma-write-with-imm", "rdma-read"}

func (o WROpcode) String() string { return enumName(wrOpcodeNames[:], o, "wr-opcode") }

// SendFlags modify a send work request.
type SendFlags uint8

// Send flags.
const (
	SendSignaled  SendFlags = 1 << iota // generate a completion on success
	SendSolicited                       // set the solicited-event bit on the last packet
)

// SendWR is a send work request. PostSend copies it; the SGE memory must
// stay registered and unchanged until the request completes.
type SendWR struct {
	ID         uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGList     []SGE
	Imm        uint32 // for the *WithImm opcodes
	RemoteAddr uint64 // RDMA: remote virtual address
	RKey       uint32 // RDMA: remote key
}

// RecvWR is a receive work request: buffers for one incoming message.
type RecvWR struct {
	ID     uint64
	SGList []SGE
}

// sendWQE is a posted send work request with its transmit state.
// Retransmission regenerates packets from it and the registered memory;
// nothing else is kept.
type sendWQE struct {
	id      uint64
	opcode  WROpcode
	flags   SendFlags
	imm     uint32
	raddr   uint64
	rkey    uint32
	sg      [][]byte // resolved local memory; capacity MaxSendSGE
	length  int
	npkts   int    // PSNs the message occupies (READ: response packets)
	first   uint32 // first PSN, valid once started
	readGot int    // READ: bytes received in order
	readAll bool   // READ: the last response arrived
}

// recvWQE is a posted receive work request.
type recvWQE struct {
	id     uint64
	sg     [][]byte
	length int
}

// QP is a reliable connected queue pair. Like everything an Endpoint
// owns, it must only be used from the goroutine that calls the
// endpoint's Poll.
type QP struct {
	ep      *Endpoint
	pd      *PD
	qpn     uint32
	sendCQ  *CQ
	recvCQ  *CQ
	sigAll  bool
	noRNR   bool
	onEvent func(Event)
	cap     QPCap

	state     QPState
	attr      QPAttr
	timeout   time.Duration // 0: no retransmit timer
	hdr       wire.FrameHeader
	commEst   bool
	destroyed bool

	sq             []sendWQE
	sqHead, sqTail uint64 // posted WQEs are [sqHead, sqTail)
	rq             []recvWQE
	rqHead, rqTail uint64
	srq            *SRQ
	srqWQE         recvWQE // taken from the SRQ for the message in progress
	srqCur         bool    // srqWQE is valid
	srqHeld        int     // taken from the SRQ and not released (SetSRQLimit)
	srqLimit       int
	req            requester
	resp           responder
	cnt            *qpCounters
	respTurn       bool // alternate responder and requester output
	statsEntry     *statsEntry
	lastErr        error
}

// CreateQP creates a reliable connected QP in RESET.
func (pd *PD) CreateQP(attr *QPInitAttr) (*QP, error) {
	e := pd.ep
	c := attr.Cap
	if c.MaxSendSGE == 0 {
		c.MaxSendSGE = 1
	}
	if c.MaxRecvSGE == 0 {
		c.MaxRecvSGE = 1
	}
	switch {
	case pd.dead:
		return nil, fmt.Errorf("roce: create qp: pd deallocated: %w", ErrInvalidState)
	case attr.SendCQ == nil || attr.RecvCQ == nil || attr.SendCQ.destroyed || attr.RecvCQ.destroyed:
		return nil, fmt.Errorf("roce: create qp: missing completion queue: %w", ErrInvalidArgument)
	case attr.SendCQ.ep != e || attr.RecvCQ.ep != e:
		return nil, fmt.Errorf("roce: create qp: completion queue of another endpoint: %w", ErrInvalidArgument)
	case attr.SRQ != nil && (attr.SRQ.destroyed || attr.SRQ.pd != pd):
		return nil, fmt.Errorf("roce: create qp: srq destroyed or of another pd: %w", ErrInvalidArgument)
	case c.MaxSendWR < 1 || c.MaxSendWR > MaxQueueDepth || attr.SRQ == nil && (c.MaxRecvWR < 1 || c.MaxRecvWR > MaxQueueDepth):
		return nil, fmt.Errorf("roce: create qp: queue depths %d/%d not in 1..%d: %w",
			c.MaxSendWR, c.MaxRecvWR, MaxQueueDepth, ErrInvalidArgument)
	case c.MaxSendSGE < 1 || c.MaxSendSGE > MaxSGE || c.MaxRecvSGE < 1 || c.MaxRecvSGE > MaxSGE:
		return nil, fmt.Errorf("roce: create qp: sge limits %d/%d not in 1..%d: %w",
			c.MaxSendSGE, c.MaxRecvSGE, MaxSGE, ErrInvalidArgument)
	}
	qpn, err := e.allocQPN()
	if err != nil {
		return nil, err
	}
	if attr.SRQ != nil {
		c.MaxRecvWR, c.MaxRecvSGE = 0, attr.SRQ.maxSGE
	}
	qp := &QP{
		ep:      e,
		pd:      pd,
		qpn:     qpn,
		sendCQ:  attr.SendCQ,
		recvCQ:  attr.RecvCQ,
		sigAll:  attr.SigAll,
		noRNR:   attr.NoRNR,
		onEvent: attr.OnEvent,
		cap:     c,
		sq:      make([]sendWQE, c.MaxSendWR),
		rq:      make([]recvWQE, c.MaxRecvWR),
		cnt:     &qpCounters{},
		srq:     attr.SRQ,
	}
	if qp.srq != nil {
		qp.srq.users++
		qp.srqWQE.sg = make([][]byte, 0, qp.srq.maxSGE)
	}
	for i := range qp.sq {
		qp.sq[i].sg = make([][]byte, 0, c.MaxSendSGE)
	}
	for i := range qp.rq {
		qp.rq[i].sg = make([][]byte, 0, c.MaxRecvSGE)
	}
	attr.SendCQ.users++
	attr.RecvCQ.users++
	pd.qps++
	e.addQP(qp)
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// PD returns the QP's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// State returns the QP's state.
func (qp *QP) State() QPState { return qp.state }

// Cap returns the QP's queue sizes.
func (qp *QP) Cap() QPCap { return qp.cap }

// SendCQ returns the completion queue of the send queue.
func (qp *QP) SendCQ() *CQ { return qp.sendCQ }

// RecvCQ returns the completion queue of the receive queue.
func (qp *QP) RecvCQ() *CQ { return qp.recvCQ }

// Query returns the QP's current attributes.
func (qp *QP) Query() QPAttr {
	a := qp.attr
	a.State = qp.state
	return a
}

// Err returns the error that moved the QP to ERROR, if a transport error did.
func (qp *QP) Err() error { return qp.lastErr }

// SendQueueFree returns the free send queue slots.
func (qp *QP) SendQueueFree() int { return len(qp.sq) - int(qp.sqTail-qp.sqHead) }

// RecvQueueLen returns the receive work requests posted and not completed.
func (qp *QP) RecvQueueLen() int { return int(qp.rqTail - qp.rqHead) }

// Modify changes the attributes selected by mask and, with QPAttrState,
// moves the QP to attr.State. Allowed transitions: RESET→INIT, INIT→INIT,
// INIT→RTR, RTR→RTS, RTS→RTS and any state to ERROR or RESET. Moving to
// ERROR flushes every posted work request; moving to RESET discards them
// without completions.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if qp.destroyed {
		return fmt.Errorf("roce: modify qp %d: destroyed: %w", qp.qpn, ErrInvalidState)
	}
	from, to := qp.state, qp.state
	if mask&QPAttrState != 0 {
		to = attr.State
	}
	rest := mask &^ QPAttrState
	switch {
	case to == QPStateError || to == QPStateReset:
		if rest != 0 {
			return fmt.Errorf("roce: modify qp %d %v→%v: attributes %#x not allowed: %w", qp.qpn, from, to, uint32(rest), ErrInvalidArgument)
		}
		if to == QPStateError {
			qp.enterError(nil)
		} else {
			qp.reset()
		}
		return nil
	}
	tr, ok := transitions[[2]QPState{from, to}]
	if !ok {
		return fmt.Errorf("roce: modify qp %d %v→%v: %w", qp.qpn, from, to, ErrInvalidState)
	}
	if missing := tr.required &^ rest; missing != 0 {
		return fmt.Errorf("roce: modify qp %d %v→%v: missing attributes %#x: %w", qp.qpn, from, to, uint32(missing), ErrInvalidArgument)
	}
	if extra := rest &^ (tr.required | tr.optional); extra != 0 {
		return fmt.Errorf("roce: modify qp %d %v→%v: attributes %#x not allowed: %w", qp.qpn, from, to, uint32(extra), ErrInvalidArgument)
	}
	if err := validateAttr(attr, rest); err != nil {
		return fmt.Errorf("roce: modify qp %d %v→%v: %w", qp.qpn, from, to, err)
	}
	if rest&QPAttrAV != 0 {
		av := attr.AV
		if !av.SrcIP.IsValid() {
			av.SrcIP = qp.ep.ip
		}
		av.SrcIP, av.DstIP = av.SrcIP.Unmap(), av.DstIP.Unmap()
		if av.SrcIP.Is4() != av.DstIP.Is4() {
			return fmt.Errorf("roce: modify qp %d: av %v→%v mixes address families: %w", qp.qpn, av.SrcIP, av.DstIP, ErrInvalidArgument)
		}
		if av.VLANs.N > header.MaxVLANs {
			return fmt.Errorf("roce: modify qp %d: %d vlan tags, max %d: %w", qp.qpn, av.VLANs.N, header.MaxVLANs, ErrInvalidArgument)
		}
		if av.TTL == 0 {
			av.TTL = 64
		}
		if av.UDPSrc == 0 {
			av.UDPSrc = udpSourcePort(qp.qpn)
		}
		qp.attr.AV = av
		qp.hdr = wire.FrameHeader{
			SrcMAC: qp.ep.mac, DstMAC: av.DstMAC, VLANs: av.VLANs,
			SrcIP: av.SrcIP, DstIP: av.DstIP, TOS: av.TOS, TTL: av.TTL, UDPSrc: av.UDPSrc,
		}
	}
	a := &qp.attr
	setAttr(rest, QPAttrAccessFlags, &a.Access, attr.Access)
	setAttr(rest, QPAttrPathMTU, &a.PathMTU, attr.PathMTU)
	setAttr(rest, QPAttrDestQPN, &a.DestQPN, attr.DestQPN)
	setAttr(rest, QPAttrRQPSN, &a.RQPSN, attr.RQPSN)
	setAttr(rest, QPAttrSQPSN, &a.SQPSN, attr.SQPSN)
	setAttr(rest, QPAttrMaxDestRdAtomic, &a.MaxDestRdAtomic, attr.MaxDestRdAtomic)
	setAttr(rest, QPAttrMaxRdAtomic, &a.MaxRdAtomic, attr.MaxRdAtomic)
	setAttr(rest, QPAttrMinRNRTimer, &a.MinRNRTimer, attr.MinRNRTimer)
	if setAttr(rest, QPAttrTimeout, &a.Timeout, attr.Timeout) {
		qp.timeout = 0
		if a.Timeout != 0 {
			qp.timeout = 4096 * time.Nanosecond << a.Timeout
		}
	}
	if setAttr(rest, QPAttrRetryCnt, &a.RetryCnt, attr.RetryCnt) {
		qp.req.retryLeft = a.RetryCnt
	}
	if setAttr(rest, QPAttrRNRRetry, &a.RNRRetry, attr.RNRRetry) {
		qp.req.rnrLeft = a.RNRRetry
	}
	switch {
	case from == QPStateInit && to == QPStateRTR:
		qp.resp.start(a.RQPSN)
	case from == QPStateRTR && to == QPStateRTS:
		qp.req.start(a, qp.sqHead)
	}
	qp.setState(to)
	return nil
}

// setAttr sets *dst to v when mask selects bit, and reports whether it
// did.
func setAttr[T any](mask, bit QPAttrMask, dst *T, v T) bool {
	if mask&bit == 0 {
		return false
	}
	*dst = v
	return true
}

func validateAttr(a *QPAttr, m QPAttrMask) error {
	switch {
	case m&QPAttrAccessFlags != 0 && a.Access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead) != 0:
		return fmt.Errorf("access %v: %w", a.Access, ErrInvalidArgument)
	case m&QPAttrPathMTU != 0:
		if _, ok := wire.MTUEnum(a.PathMTU); !ok {
			return fmt.Errorf("path mtu %d: %w", a.PathMTU, ErrInvalidArgument)
		}
	}
	switch {
	case m&QPAttrDestQPN != 0 && (a.DestQPN > wire.PSNMask || a.DestQPN < 2):
		return fmt.Errorf("dest qpn %d: %w", a.DestQPN, ErrInvalidArgument)
	case m&QPAttrRQPSN != 0 && a.RQPSN > wire.PSNMask, m&QPAttrSQPSN != 0 && a.SQPSN > wire.PSNMask:
		return fmt.Errorf("psn %#x/%#x wider than 24 bits: %w", a.RQPSN, a.SQPSN, ErrInvalidArgument)
	case m&QPAttrMaxDestRdAtomic != 0 && (a.MaxDestRdAtomic < 0 || a.MaxDestRdAtomic > MaxRdAtomic),
		m&QPAttrMaxRdAtomic != 0 && (a.MaxRdAtomic < 0 || a.MaxRdAtomic > MaxRdAtomic):
		return fmt.Errorf("rd atomic %d/%d not in 0..%d: %w", a.MaxRdAtomic, a.MaxDestRdAtomic, MaxRdAtomic, ErrInvalidArgument)
	case m&QPAttrMinRNRTimer != 0 && a.MinRNRTimer > MaxTimerCode, m&QPAttrTimeout != 0 && a.Timeout > MaxTimerCode:
		return fmt.Errorf("timer code %d/%d not in 0..%d: %w", a.MinRNRTimer, a.Timeout, MaxTimerCode, ErrInvalidArgument)
	case m&QPAttrRetryCnt != 0 && a.RetryCnt > MaxRetry, m&QPAttrRNRRetry != 0 && a.RNRRetry > MaxRetry:
		return fmt.Errorf("retry counts %d/%d not in 0..%d: %w", a.RetryCnt, a.RNRRetry, MaxRetry, ErrInvalidArgument)
	case m&QPAttrAV != 0 && !a.AV.DstIP.IsValid():
		return fmt.Errorf("av without destination ip: %w", ErrInvalidArgument)
	}
	return nil
}

func (qp *QP) setState(s QPState) {
	qp.state = s
	qp.cnt.state.Store(int32(s))
}

// Destroy moves the QP to RESET and removes it from its endpoint.
func (qp *QP) Destroy() error {
	if qp.destroyed {
		return fmt.Errorf("roce: destroy qp %d: %w", qp.qpn, ErrInvalidState)
	}
	qp.reset()
	qp.destroyed = true
	qp.sendCQ.users--
	qp.recvCQ.users--
	if qp.srq != nil {
		qp.srq.users--
	}
	qp.pd.qps--
	qp.ep.removeQP(qp)
	return nil
}

// PostSend queues a send work request. In ERROR the request completes at
// once as flushed. SGEs are checked when posted: an unknown L_Key, an
// SGE outside its region or a READ into memory without local write fails
// with ErrLocalProtection and nothing is queued.
func (qp *QP) PostSend(wr *SendWR) error {
	switch qp.state {
	case QPStateRTS:
	case QPStateError:
		if qp.SendQueueFree() == 0 {
			return fmt.Errorf("roce: post send on qp %d: %w", qp.qpn, ErrQueueFull)
		}
		qp.pushSendWC(&WorkCompletion{WRID: wr.ID, Status: WCWRFlushErr, Opcode: wrCompletionOpcode(wr.Opcode)})
		return nil
	default:
		return fmt.Errorf("roce: post send on qp %d in %v: %w", qp.qpn, qp.state, ErrInvalidState)
	}
	if qp.SendQueueFree() == 0 {
		return fmt.Errorf("roce: post send on qp %d: %w", qp.qpn, ErrQueueFull)
	}
	if wr.Opcode > WRRDMARead {
		return fmt.Errorf("roce: post send on qp %d: opcode %v: %w", qp.qpn, wr.Opcode, ErrInvalidArgument)
	}
	if len(wr.SGList) > qp.cap.MaxSendSGE {
		return fmt.Errorf("roce: post send on qp %d: %d sges, max %d: %w", qp.qpn, len(wr.SGList), qp.cap.MaxSendSGE, ErrInvalidArgument)
	}
	if wr.Opcode == WRRDMARead && qp.attr.MaxRdAtomic == 0 {
		return fmt.Errorf("roce: post rdma read on qp %d: max rd atomic is 0: %w", qp.qpn, ErrInvalidArgument)
	}
	need := Access(0)
	if wr.Opcode == WRRDMARead {
		need = AccessLocalWrite
	}
	w := &qp.sq[qp.sqTail%uint64(len(qp.sq))]
	n, err := qp.resolve(w.sg[:0], wr.SGList, need)
	if err != nil {
		return fmt.Errorf("roce: post send on qp %d: %w", qp.qpn, err)
	}
	if n > maxMessagePSNs*qp.attr.PathMTU {
		// PSN comparisons only work within half the 24-bit space.
		return fmt.Errorf("roce: post send on qp %d: %d bytes exceed %d packets of %d: %w",
			qp.qpn, n, maxMessagePSNs, qp.attr.PathMTU, ErrInvalidArgument)
	}
	w.sg = w.sg[:len(wr.SGList)]
	*w = sendWQE{
		id: wr.ID, opcode: wr.Opcode, flags: wr.Flags, imm: wr.Imm,
		raddr: wr.RemoteAddr, rkey: wr.RKey, sg: w.sg, length: n,
		npkts: max(1, (n+qp.attr.PathMTU-1)/qp.attr.PathMTU),
	}
	qp.sqTail++
	return nil
}

// PostRecv queues a receive work request. It is allowed from INIT on; in
// ERROR the request completes at once as flushed.
func (qp *QP) PostRecv(wr *RecvWR) error {
	if qp.srq != nil {
		return fmt.Errorf("roce: post recv on qp %d: it takes its receives from an srq: %w", qp.qpn, ErrInvalidState)
	}
	switch qp.state {
	case QPStateInit, QPStateRTR, QPStateRTS:
	case QPStateError:
		if qp.RecvQueueLen() == len(qp.rq) {
			return fmt.Errorf("roce: post recv on qp %d: %w", qp.qpn, ErrQueueFull)
		}
		qp.pushRecvWC(&WorkCompletion{WRID: wr.ID, Status: WCWRFlushErr, Opcode: WCRecv})
		return nil
	default:
		return fmt.Errorf("roce: post recv on qp %d in %v: %w", qp.qpn, qp.state, ErrInvalidState)
	}
	if qp.RecvQueueLen() == len(qp.rq) {
		return fmt.Errorf("roce: post recv on qp %d: %w", qp.qpn, ErrQueueFull)
	}
	if len(wr.SGList) > qp.cap.MaxRecvSGE {
		return fmt.Errorf("roce: post recv on qp %d: %d sges, max %d: %w", qp.qpn, len(wr.SGList), qp.cap.MaxRecvSGE, ErrInvalidArgument)
	}
	w := &qp.rq[qp.rqTail%uint64(len(qp.rq))]
	n, err := qp.resolve(w.sg[:0], wr.SGList, AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("roce: post recv on qp %d: %w", qp.qpn, err)
	}
	w.id, w.sg, w.length = wr.ID, w.sg[:len(wr.SGList)], n
	qp.rqTail++
	return nil
}

func wrCompletionOpcode(op WROpcode) WCOpcode {
	switch op {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	}
	return WCSend
}

func (qp *QP) pushSendWC(wc *WorkCompletion) {
	wc.QPN, wc.SrcQP = qp.qpn, qp.attr.DestQPN
	if !qp.sendCQ.push(wc) {
		qp.cqOverrun(qp.sendCQ)
	}
}

func (qp *QP) pushRecvWC(wc *WorkCompletion) {
	wc.QPN, wc.SrcQP = qp.qpn, qp.attr.DestQPN
	if !qp.recvCQ.push(wc) {
		qp.cqOverrun(qp.recvCQ)
	}
}

// cqOverrun reports a lost completion and fails the QP, since its
// consumer can no longer account for its work requests.
func (qp *QP) cqOverrun(cq *CQ) {
	err := fmt.Errorf("roce: qp %d: completion queue of depth %d overrun: %w", qp.qpn, len(cq.ring), ErrLocalQPOperation)
	qp.ep.queueEvent(cq.onEvent, Event{Type: EventCQOverrun, QPN: qp.qpn, Err: err})
	if qp.state != QPStateError {
		qp.enterError(err)
	}
}

// completeSend retires the send WQE at the head of the send queue.
func (qp *QP) completeSend(st WCStatus) {
	w := &qp.sq[qp.sqHead%uint64(len(qp.sq))]
	qp.sqHead++
	if st == WCSuccess && !qp.sigAll && w.flags&SendSignaled == 0 {
		return
	}
	qp.pushSendWC(&WorkCompletion{
		WRID: w.id, Status: st, Opcode: wrCompletionOpcode(w.opcode), ByteLen: uint32(w.length),
	})
}

// completeRecv retires the receive WQE at the head of the receive queue.
func (qp *QP) completeRecv(st WCStatus, op WCOpcode, n int, imm uint32, withImm bool) {
	w := qp.recvHead()
	if qp.srq == nil {
		qp.rqHead++
	} else {
		qp.srqCur = false
	}
	wc := WorkCompletion{WRID: w.id, Status: st, Opcode: op, ByteLen: uint32(n), Imm: imm}
	if withImm {
		wc.Flags = WCWithImm
	}
	qp.pushRecvWC(&wc)
}

// enterError moves the QP to ERROR and completes every posted work
// request as flushed. When a transport error caused it (cause not nil),
// the caller has already completed the failing work request with its
// status, and an EventQPFatal is raised.
func (qp *QP) enterError(cause error) {
	if qp.state == QPStateError {
		return
	}
	qp.setState(QPStateError)
	qp.lastErr = cause
	for qp.sqHead < qp.sqTail {
		qp.completeSend(WCWRFlushErr)
	}
	for qp.hasRecvHead() {
		// With an SRQ only the receive taken is flushed: the rest serve
		// the other QPs.
		qp.completeRecv(WCWRFlushErr, WCRecv, 0, 0, false)
	}
	qp.req.stop()
	qp.resp.stop()
	if cause != nil {
		qp.ep.queueEvent(qp.onEvent, Event{Type: EventQPFatal, QPN: qp.qpn, Err: cause})
	}
}

// reset discards all queue and transport state.
func (qp *QP) reset() {
	qp.sqHead, qp.sqTail, qp.rqHead, qp.rqTail = 0, 0, 0, 0
	if qp.srqCur {
		// Discarded by the reset, but its buffer is the SRQ owner's.
		qp.srq.putBack(&qp.srqWQE)
		qp.srqCur = false
	}
	qp.srqHeld = 0
	qp.req = requester{}
	qp.resp.stop()
	qp.resp.ctl = ctlNone
	qp.commEst = false
	qp.lastErr = nil
	qp.attr = QPAttr{}
	qp.timeout = 0
	qp.setState(QPStateReset)
}
