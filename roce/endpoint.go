package roce

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// PacketIO moves Ethernet frames: the daemon's DPDK port (fed by the
// dispatcher's ring for UDP 4791) or, in tests, an in-memory link.
type PacketIO interface {
	// RecvBurst fills frames with up to len(frames) received Ethernet
	// frames and returns how many; the frames stay valid until the next
	// RecvBurst call.
	RecvBurst(frames [][]byte) int
	// SendBurst transmits frames (copied by the implementation before it
	// returns) and returns how many were accepted.
	SendBurst(frames [][]byte) int
}

// Endpoint defaults.
const (
	DefaultBurst          = 32
	DefaultMaxUnackedPSNs = 128  // rxe RXE_MAX_UNACKED_PSNS
	DefaultAckReqEvery    = 64   // rxe RXE_MAX_PKT_PER_ACK
	DefaultFirstQPN       = 0x11 // rxe's first QPN
)

// Idle probe intervals (EndpointConfig.IdleProbe). The default is what
// the daemon configures when roce.idle_probe is not set: far below
// Ceph's ms_tcp_read_timeout (15 min), so that a client gone without a
// DREQ frees its session (and the daemon's TCP connection) within about
// IdleProbe + timeout × (retry_cnt+1).
const (
	DefaultIdleProbe = 15 * time.Second
	MinIdleProbe     = time.Second
	MaxIdleProbe     = time.Hour
)

// maxFrameLen fits the largest frame of a 4096-byte path MTU: Ethernet
// with the most VLAN tags, IPv6, UDP, BTH, RETH and ImmDt, payload, pad,
// ICRC.
const maxFrameLen = header.MaxLinkHeaderLen + 40 + 8 + wire.BTHLen + wire.RETHLen + wire.ImmLen + 4096 + 3 + wire.ICRCLen

// EndpointConfig configures an Endpoint.
type EndpointConfig struct {
	MAC [6]byte
	IP  netip.Addr // IPv4 (or IPv6) address the endpoint answers for
	IO  PacketIO

	RxBurst int // frames read per Poll (DefaultBurst if 0)
	TxBurst int // frames built and sent per Poll (DefaultBurst if 0)
	// MaxUnackedPSNs is each requester's window: it sends no PSN this far
	// past the oldest unacknowledged one (DefaultMaxUnackedPSNs if 0).
	MaxUnackedPSNs int
	// AckReqEvery sets AckReq on at least every this many packets of a
	// long message, besides each message's last (DefaultAckReqEvery if 0).
	AckReqEvery int
	FirstQPN    uint32 // first QP number handed out (DefaultFirstQPN if 0)
	// MaxRNRWait caps how long a requester waits after an RNR NAK (0: as
	// the NAK's timer code says). rdma_cm leaves Linux peers' QPs with
	// min_rnr_timer 0, which means 655 ms; a cap of a few milliseconds
	// costs at most another RNR NAK and keeps one missing receive from
	// stalling a session for two thirds of a second.
	MaxRNRWait time.Duration
	// IdleProbe is how long a QP in RTS with nothing in flight waits
	// without hearing from its peer before it sends an idle probe (see
	// QP.idleTimer): 0 disables, otherwise MinIdleProbe..MaxIdleProbe
	// (DefaultIdleProbe is the daemon's). A peer that answers neither
	// the probe nor its resends, on the QP's retransmit schedule, is
	// declared dead like one that lets requests go unacknowledged: the
	// QP goes to ERROR with ErrRetryExceeded and ErrPeerDead. QPs with
	// no transport timer (QPAttr.Timeout 0) never probe.
	IdleProbe time.Duration
}

// Endpoint terminates RoCEv2 for one local MAC and IP address: it owns
// protection domains, completion queues and QPs, demultiplexes received
// frames by destination QP and transmits what the QPs produce.
//
// An Endpoint and everything created from it belong to the goroutine
// that calls Poll: none of their methods may run concurrently with it,
// except Stats and metrics collection. That goroutine needs no locks.
type Endpoint struct {
	cfg EndpointConfig
	mac [6]byte
	ip  netip.Addr
	io  PacketIO

	qps     map[uint32]*QP
	qpList  []*QP
	rr      int
	nextQPN uint32

	rxFrames  [][]byte
	rxPkt     wire.Packet
	txPkt     wire.Packet
	txFrames  [][]byte // [0:txN] built and not yet accepted by io
	txN       int
	gatherBuf []byte

	gsiPkt    wire.Packet
	gsiBuf    []byte
	gsiFrames [][]byte
	gsiPSN    uint32
	rawFrames [][]byte

	// The dispatchers (Attach): the neighbour table and the connection
	// manager.
	nd       NetworkDispatcher
	td       TransportDispatcher
	attached bool

	notify []*CQ
	events [64]pendingEvent
	evHead int
	evN    int

	cnt endpointCounters
	reg struct {
		sync.Mutex
		entries []*statsEntry
	}
}

type pendingEvent struct {
	handler func(Event)
	ev      Event
}

// NewEndpoint returns an endpoint for cfg.MAC and cfg.IP over cfg.IO.
func NewEndpoint(cfg EndpointConfig) (*Endpoint, error) {
	if cfg.IO == nil {
		return nil, fmt.Errorf("roce: new endpoint: no packet io: %w", ErrInvalidArgument)
	}
	if !cfg.IP.IsValid() {
		return nil, fmt.Errorf("roce: new endpoint: no ip address: %w", ErrInvalidArgument)
	}
	cfg.IP = cfg.IP.Unmap()
	orDefault(&cfg.RxBurst, DefaultBurst)
	orDefault(&cfg.TxBurst, DefaultBurst)
	orDefault(&cfg.MaxUnackedPSNs, DefaultMaxUnackedPSNs)
	orDefault(&cfg.AckReqEvery, DefaultAckReqEvery)
	if cfg.FirstQPN < 2 || cfg.FirstQPN > wire.PSNMask {
		cfg.FirstQPN = DefaultFirstQPN
	}
	if p := cfg.IdleProbe; p != 0 && (p < MinIdleProbe || p > MaxIdleProbe) {
		return nil, fmt.Errorf("roce: new endpoint: idle probe %v not 0 or in %v..%v: %w", p, MinIdleProbe, MaxIdleProbe, ErrInvalidArgument)
	}
	if cfg.MaxUnackedPSNs > maxMessagePSNs {
		return nil, fmt.Errorf("roce: new endpoint: window of %d psns exceeds %d: %w", cfg.MaxUnackedPSNs, maxMessagePSNs, ErrInvalidArgument)
	}
	e := &Endpoint{
		cfg:       cfg,
		mac:       cfg.MAC,
		ip:        cfg.IP,
		io:        cfg.IO,
		qps:       make(map[uint32]*QP),
		nextQPN:   cfg.FirstQPN,
		rxFrames:  make([][]byte, cfg.RxBurst),
		txFrames:  make([][]byte, cfg.TxBurst),
		gatherBuf: make([]byte, 4096),
		gsiBuf:    make([]byte, maxFrameLen),
		gsiFrames: make([][]byte, 1),
		rawFrames: make([][]byte, 1),
	}
	for i := range e.txFrames {
		e.txFrames[i] = make([]byte, 0, maxFrameLen)
	}
	return e, nil
}

// MAC returns the endpoint's MAC address.
func (e *Endpoint) MAC() [6]byte { return e.mac }

// IP returns the endpoint's IP address.
func (e *Endpoint) IP() netip.Addr { return e.ip }

// Poll does one round of work at time now: it transmits frames left over
// from the previous round, reads one burst and dispatches it (to the QPs,
// or to the attached dispatchers), runs the QPs' timers, builds and
// transmits up to a burst of frames, and then calls the event handlers
// (the transport dispatcher's last) and the completion handlers. It
// returns the number of frames received and transmitted, so a caller can
// tell an idle round.
func (e *Endpoint) Poll(now time.Time) int {
	work := e.flush()
	n := e.io.RecvBurst(e.rxFrames)
	for i := 0; i < n; i++ {
		e.input(e.rxFrames[i], now)
	}
	e.cnt.rxFrames.Add(uint64(n))
	for _, qp := range e.qpList {
		qp.reqTimers(now)
		qp.respTimers(now)
	}
	work += n + e.output(now)
	e.deliver(now)
	return work
}

// NextDeadline returns the earliest time a QP timer (retransmit, RNR
// wait, tail-loss probe, idle probe, or a message that stopped short)
// expires, if one is running. A caller that found Poll idle can
// sleep, or in tests advance its clock, until then.
func (e *Endpoint) NextDeadline() (time.Time, bool) {
	var next deadline
	for _, qp := range e.qpList {
		next.add(qp.reqDeadline())
		next.add(qp.respDeadline())
	}
	return next.at, next.set
}

// deadline is the earliest of the deadlines added to it, if any is set.
type deadline struct {
	at  time.Time
	set bool
}

// add takes at into account if set.
func (d *deadline) add(at time.Time, set bool) {
	if set && (!d.set || at.Before(d.at)) {
		d.at, d.set = at, true
	}
}

// flush hands the built frames to io and keeps those it did not accept,
// in order, for the next round.
func (e *Endpoint) flush() int {
	if e.txN == 0 {
		return 0
	}
	k := e.io.SendBurst(e.txFrames[:e.txN])
	k = max(0, min(k, e.txN))
	for i := k; i < e.txN; i++ {
		e.txFrames[i-k], e.txFrames[i] = e.txFrames[i], e.txFrames[i-k]
	}
	e.txN -= k
	if e.txN > 0 {
		e.cnt.txBusy.Add(1)
	}
	e.cnt.txFrames.Add(uint64(k))
	return k
}

// output lets the QPs fill the free frame buffers, one frame per QP in
// turn, and transmits them.
func (e *Endpoint) output(now time.Time) int {
	nq := len(e.qpList)
	if nq == 0 {
		return e.flush()
	}
	e.rr = (e.rr + 1) % nq
	for e.txN < len(e.txFrames) {
		progress := false
		for i := 0; i < nq && e.txN < len(e.txFrames); i++ {
			qp := e.qpList[(e.rr+i)%nq]
			buf := e.txFrames[e.txN]
			if n := qp.output(buf[:cap(buf)], now); n > 0 {
				e.txFrames[e.txN] = buf[:n]
				e.txN++
				qp.cnt.txPackets.Add(1)
				qp.cnt.txBytes.Add(uint64(n))
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	return e.flush()
}

// input handles one received frame. Frames that fail to parse, and among
// them those with a bad ICRC, are dropped silently and counted by reason,
// as rxe does; so are well-formed frames that are not RoCEv2 and that the
// network dispatcher (ARP) does not take.
func (e *Endpoint) input(frame []byte, now time.Time) {
	p := &e.rxPkt
	if err := wire.ParsePacket(frame, p); err != nil {
		switch {
		case errors.Is(err, wire.ErrBadICRC):
			e.cnt.icrcErrors.Add(1)
			if qp := e.qps[p.BTH.DestQP]; qp != nil {
				qp.cnt.icrcErrors.Add(1)
			}
		case errors.Is(err, wire.ErrTooManyVLANs):
			e.cnt.tooManyVLANs.Add(1)
		case errors.Is(err, wire.ErrNotRoCE):
			if e.nd == nil || !e.nd.HandleFrame(frame, now) {
				e.cnt.notRoCE.Add(1)
			}
		default:
			e.cnt.malformed.Add(1)
		}
		return
	}
	if p.DstMAC != e.mac || p.DstIP != e.ip {
		e.cnt.notLocal.Add(1)
		return
	}
	if e.nd != nil {
		e.nd.Learn(p.SrcIP, p.SrcMAC, now)
	}
	switch p.BTH.Opcode.Transport() {
	case wire.TransportRC:
		qp := e.qps[p.BTH.DestQP]
		if qp == nil {
			e.cnt.noQP.Add(1)
			return
		}
		qp.input(p, len(frame), now)
	case wire.TransportUD:
		if p.BTH.DestQP != 1 || p.DETH.QKey != wire.GSIQKey || e.td == nil {
			e.cnt.noQP.Add(1)
			return
		}
		e.cnt.gsiReceived.Add(1)
		e.td.DeliverGSI(p)
	default:
		e.cnt.unsupp.Add(1)
	}
}

// SendGSI transmits payload (a MAD) as a UD SEND ONLY from QP1 to QP1 of
// the host av describes, with the GSI Q_Key. It returns an error wrapping
// ErrWouldBlock if the link did not take the frame.
func (e *Endpoint) SendGSI(av *AddressVector, payload []byte) error {
	src := av.SrcIP
	if !src.IsValid() {
		src = e.ip
	}
	ttl := av.TTL
	if ttl == 0 {
		ttl = 64
	}
	udp := av.UDPSrc
	if udp == 0 {
		udp = udpSourcePort(1)
	}
	hdr := wire.FrameHeader{
		SrcMAC: e.mac, DstMAC: av.DstMAC, VLANs: av.VLANs,
		SrcIP: src, DstIP: av.DstIP, TOS: av.TOS, TTL: ttl, UDPSrc: udp,
	}
	p := &e.gsiPkt
	p.BTH = wire.BTH{Opcode: wire.OpUDSendOnly, PKey: wire.DefaultPKey, DestQP: 1, PSN: e.gsiPSN}
	p.DETH = wire.DETH{QKey: wire.GSIQKey, SrcQP: 1}
	n, err := wire.BuildFrame(e.gsiBuf, &hdr, p, payload)
	if err != nil {
		return fmt.Errorf("roce: send gsi to %v: %w", av.DstIP, err)
	}
	e.gsiFrames[0] = e.gsiBuf[:n]
	if e.io.SendBurst(e.gsiFrames) != 1 {
		return fmt.Errorf("roce: send gsi to %v: %w", av.DstIP, ErrWouldBlock)
	}
	e.gsiPSN = wire.PSNAdd(e.gsiPSN, 1)
	e.cnt.gsiSent.Add(1)
	e.cnt.txFrames.Add(1)
	return nil
}

// SendFrame transmits frame, a complete Ethernet frame, as it is. It
// returns an error wrapping ErrWouldBlock if the link did not take it.
func (e *Endpoint) SendFrame(frame []byte) error {
	e.rawFrames[0] = frame
	n := e.io.SendBurst(e.rawFrames)
	e.rawFrames[0] = nil
	if n != 1 {
		return fmt.Errorf("roce: send frame of %d bytes: %w", len(frame), ErrWouldBlock)
	}
	e.cnt.txFrames.Add(1)
	return nil
}

// NumQPs returns the number of QPs created on the endpoint and not yet
// destroyed.
func (e *Endpoint) NumQPs() int { return len(e.qps) }

// Endpoint returns the endpoint the QP was created on.
func (qp *QP) Endpoint() *Endpoint { return qp.ep }

// queueEvent holds an event for delivery at the end of Poll, so handlers
// never run in the middle of packet processing. Events beyond the
// bounded queue are dropped.
func (e *Endpoint) queueEvent(h func(Event), ev Event) {
	if h == nil && e.td == nil || e.evN == len(e.events) {
		return
	}
	e.events[(e.evHead+e.evN)%len(e.events)] = pendingEvent{h, ev}
	e.evN++
}

// deliver runs the queued event handlers, then the completion handlers
// of the CQs that received completions.
func (e *Endpoint) deliver(now time.Time) {
	for e.evN > 0 {
		pe := e.events[e.evHead]
		e.events[e.evHead] = pendingEvent{}
		e.evHead = (e.evHead + 1) % len(e.events)
		e.evN--
		if pe.handler != nil {
			pe.handler(pe.ev)
		}
		if e.td != nil {
			e.td.DeliverEvent(pe.ev, now)
		}
	}
	for i := 0; i < len(e.notify); i++ {
		cq := e.notify[i]
		e.notify[i] = nil
		cq.notifyQueued = false
		cq.onCompletion(cq)
	}
	e.notify = e.notify[:0]
}

func (e *Endpoint) allocQPN() (uint32, error) {
	for range wire.PSNMask {
		q := e.nextQPN
		e.nextQPN++
		if e.nextQPN > wire.PSNMask {
			e.nextQPN = 2
		}
		if _, used := e.qps[q]; !used && q >= 2 {
			return q, nil
		}
	}
	return 0, fmt.Errorf("roce: create qp: qp numbers exhausted: %w", ErrNoMemory)
}

func (e *Endpoint) addQP(qp *QP) {
	e.qps[qp.qpn] = qp
	e.qpList = append(e.qpList, qp)
	qp.statsEntry = &statsEntry{qpn: qp.qpn, cnt: qp.cnt, sendCQ: qp.sendCQ, recvCQ: qp.recvCQ}
	e.reg.Lock()
	e.reg.entries = append(e.reg.entries, qp.statsEntry)
	e.reg.Unlock()
}

func (e *Endpoint) removeQP(qp *QP) {
	delete(e.qps, qp.qpn)
	for i, q := range e.qpList {
		if q == qp {
			e.qpList = append(e.qpList[:i], e.qpList[i+1:]...)
			break
		}
	}
	e.reg.Lock()
	for i, s := range e.reg.entries {
		if s == qp.statsEntry {
			e.reg.entries = append(e.reg.entries[:i], e.reg.entries[i+1:]...)
			break
		}
	}
	e.reg.Unlock()
}

// statsEntries returns the QPs' stats entries; safe from any goroutine.
func (e *Endpoint) statsEntries() []*statsEntry {
	e.reg.Lock()
	defer e.reg.Unlock()
	return append([]*statsEntry(nil), e.reg.entries...)
}

// orDefault sets *v to d when it is not positive: not set.
func orDefault(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}
