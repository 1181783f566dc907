package pcapcheck

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// ErrFormat reports input that is neither pcap nor pcapng.
var ErrFormat = errors.New("pcapcheck: not a pcap or pcapng capture")

// packetSource is what pcapgo's two readers have in common.
type packetSource interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Check reads a pcap or pcapng capture from r and audits its RoCEv2
// frames. The format is taken from the file's magic number. A capture
// cut short inside a frame (a killed tcpdump) is checked up to the cut
// and marked Truncated; other read errors fail the check.
func Check(r io.Reader) (*Report, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("pcapcheck: read magic: %w", err)
	}
	var src packetSource
	var linkType func(ci gopacket.CaptureInfo) (layers.LinkType, error)
	switch binary.BigEndian.Uint32(magic) {
	case 0x0A0D0D0A:
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("pcapcheck: pcapng header: %w", err)
		}
		src = ng
		linkType = func(ci gopacket.CaptureInfo) (layers.LinkType, error) {
			iface, err := ng.Interface(ci.InterfaceIndex)
			return iface.LinkType, err
		}
	case 0xA1B2C3D4, 0xD4C3B2A1, 0xA1B23C4D, 0x4D3CB2A1:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("pcapcheck: pcap header: %w", err)
		}
		src = pr
		lt := pr.LinkType()
		linkType = func(gopacket.CaptureInfo) (layers.LinkType, error) { return lt, nil }
	default:
		return nil, ErrFormat
	}

	c := newChecker()
	var scratch []byte
	for n := 1; ; n++ {
		data, ci, err := src.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			c.rep.Truncated = true
			break
		}
		if err != nil {
			return nil, fmt.Errorf("pcapcheck: frame %d: %w", n, err)
		}
		c.rep.Frames++
		lt, err := linkType(ci)
		if err != nil {
			return nil, fmt.Errorf("pcapcheck: frame %d: %w", n, err)
		}
		if !supported(lt) {
			return nil, fmt.Errorf("frame %d: %w", n, linkTypeError(lt))
		}
		frame, ok := toEthernet(lt, data, scratch)
		if !ok {
			continue
		}
		if lt != layers.LinkTypeEthernet {
			scratch = frame
		}
		c.frame(n, frame, ci.CaptureLength < ci.Length)
	}
	return c.rep, nil
}

type qpKey struct {
	src, dst netip.Addr
	qp       uint32
}

type connKey struct {
	active netip.Addr
	commID uint32
}

// Message states of a stream, for opcode order checks.
type msgState uint8

const (
	msgUnknown msgState = iota // start of capture or after a gap
	msgNone                    // between messages
	msgSend
	msgWrite
	msgReadResp
)

func (m msgState) String() string {
	switch m {
	case msgSend:
		return "SEND"
	case msgWrite:
		return "RDMA WRITE"
	case msgReadResp:
		return "RDMA READ response"
	}
	return "no"
}

func msgKind(op wire.Opcode) msgState {
	switch {
	case op.IsSend():
		return msgSend
	case op.IsWrite():
		return msgWrite
	case op.IsReadResp():
		return msgReadResp
	}
	return msgNone
}

// qpState is the sequence state of one QP direction.
type qpState struct {
	reqSeen       bool
	next, nextMax uint32 // acceptable next request PSNs
	reqMsg        msgState
	respSeen      bool
	respHigh      uint32
	respMsg       msgState
	readNext      uint32 // next PSN inside a multi-packet READ response
	udSeen        bool
	udNext        uint32
}

type checker struct {
	rep   *Report
	qps   map[qpKey]*QP
	conns map[connKey]*Connection
	mtus  map[qpKey]int // path MTUs announced by CM
}

func newChecker() *checker {
	return &checker{
		rep:   &Report{},
		qps:   map[qpKey]*QP{},
		conns: map[connKey]*Connection{},
		mtus:  map[qpKey]int{},
	}
}

func (c *checker) bad(n int, format string, args ...any) {
	c.rep.BadFrames = append(c.rep.BadFrames, BadFrame{Number: n, Reason: fmt.Sprintf(format, args...)})
}

func (c *checker) qp(p *wire.Packet) *QP {
	k := qpKey{p.SrcIP, p.DstIP, p.BTH.DestQP}
	q := c.qps[k]
	if q == nil {
		q = &QP{
			Src: p.SrcIP, Dst: p.DstIP, DestQP: p.BTH.DestQP,
			Transport: p.BTH.Opcode.Transport(),
			Opcodes:   map[wire.Opcode]int{},
		}
		if mtu, ok := c.mtus[k]; ok {
			q.MTU, q.MTUFromCM = mtu, true
		}
		c.qps[k] = q
		c.rep.QPs = append(c.rep.QPs, q)
	}
	return q
}

func (c *checker) frame(n int, frame []byte, snapped bool) {
	var p wire.Packet
	err := wire.ParsePacket(frame, &p)
	switch {
	case errors.Is(err, wire.ErrNotRoCE):
		return
	case err == nil:
	case errors.Is(err, wire.ErrBadICRC):
		// The headers decoded; keep following the stream so that one
		// corrupt frame is reported once, not again as a PSN gap.
		want, _ := wire.FrameICRC(frame)
		c.bad(n, "bad ICRC: trailer %#08x, computed %#08x", p.ICRC, want)
	case snapped && errors.Is(err, wire.ErrTruncated):
		c.rep.RoCEFrames++
		c.bad(n, "cut by the capture's snap length, cannot check: %v", err)
		return
	default:
		c.rep.RoCEFrames++
		c.bad(n, "malformed: %v", err)
		c.skipRequest(&p, err)
		return
	}
	c.rep.RoCEFrames++
	q := c.qp(&p)
	q.Frames++
	op := p.BTH.Opcode
	q.Opcodes[op]++
	switch {
	case op.IsCNP():
	case op.Transport() == wire.TransportUD:
		c.datagram(q, &p)
		if p.BTH.DestQP == 1 {
			c.cm(n, &p)
		}
	case op.IsRequest():
		c.request(n, q, &p)
	case op.IsResponse():
		c.response(n, q, &p)
	}
}

// skipRequest moves a request stream past a malformed request whose
// BTH decoded, so that the one bad frame is not reported again as a PSN
// gap at the next request.
func (c *checker) skipRequest(p *wire.Packet, err error) {
	if !errors.Is(err, wire.ErrBadTVer) && !errors.Is(err, wire.ErrBadPad) {
		return // the BTH was not decoded, or its opcode is unknown
	}
	op := p.BTH.Opcode
	if !op.IsRequest() || op.Transport() == wire.TransportUD {
		return
	}
	s := &c.qp(p).st
	s.reqSeen = true
	s.next = wire.PSNAdd(p.BTH.PSN, 1)
	s.nextMax = s.next
	s.reqMsg = msgUnknown
}

// datagram follows a UD stream: gaps and reorders are only counted.
func (c *checker) datagram(q *QP, p *wire.Packet) {
	s, ps, psn := &q.st, &q.Requests, p.BTH.PSN
	ps.Frames++
	if !s.udSeen {
		s.udSeen = true
		ps.FirstPSN = psn
	} else if d := wire.PSNDiff(psn, s.udNext); d < 0 {
		ps.Retransmits++
	} else if d > 0 {
		ps.Gaps++
	}
	ps.LastPSN = psn
	s.udNext = wire.PSNAdd(psn, 1)
}

// psnIn reports whether psn lies in the circular interval [lo, hi].
func psnIn(psn, lo, hi uint32) bool {
	return wire.PSNDiff(psn, lo) >= 0 && wire.PSNDiff(hi, psn) >= 0
}

// readPackets returns the fewest and most READ response packets for a
// READ of n bytes: exact when the path MTU is known, else bounded by the
// smallest and largest path MTUs.
func readPackets(n uint32, mtu int) (lo, hi int) {
	packets := func(mtu int) int { return max(1, int((uint64(n)+uint64(mtu)-1)/uint64(mtu))) }
	if mtu > 0 {
		return packets(mtu), packets(mtu)
	}
	return packets(4096), packets(256)
}

func (c *checker) request(n int, q *QP, p *wire.Packet) {
	s, ps, psn, op := &q.st, &q.Requests, p.BTH.PSN, p.BTH.Opcode
	ps.Frames++
	if !s.reqSeen {
		s.reqSeen = true
		ps.FirstPSN = psn
	} else {
		switch {
		case psnIn(psn, s.next, s.nextMax):
		case wire.PSNCompare(psn, s.next) < 0:
			ps.Retransmits++
			return
		default:
			ps.Gaps++
			c.bad(n, "psn gap: expected %d got %d", s.next, psn)
			s.reqMsg = msgUnknown
		}
	}
	ps.LastPSN = psn
	lo, hi := 1, 1
	if op.IsReadRequest() {
		lo, hi = readPackets(p.RETH.DMALen, q.MTU)
	}
	s.next, s.nextMax = wire.PSNAdd(psn, lo), wire.PSNAdd(psn, hi)
	c.order(n, op, &s.reqMsg)
	c.length(n, q, op, len(p.Payload))
}

func (c *checker) response(n int, q *QP, p *wire.Packet) {
	s, ps, psn, op := &q.st, &q.Responses, p.BTH.PSN, p.BTH.Opcode
	ps.Frames++
	if op.HasAETH() {
		switch {
		case p.AETH.IsNak():
			q.Naks++
		case p.AETH.IsRNRNak():
			q.RNRNaks++
		}
	}
	midRead := op.IsReadResp() && (op.IsMiddle() || op.IsLast()) && s.respMsg == msgReadResp
	switch {
	case !s.respSeen:
		s.respSeen = true
		ps.FirstPSN = psn
		s.respHigh = psn
	case midRead && psn != s.readNext:
		if wire.PSNCompare(psn, s.readNext) < 0 {
			ps.Retransmits++
			return
		}
		ps.Gaps++
		c.bad(n, "psn gap in read response: expected %d got %d", s.readNext, psn)
	case !midRead && (wire.PSNCompare(psn, s.respHigh) < 0 || psn == s.respHigh && (op.IsAck() || op.IsReadResp())):
		// A duplicate request was answered again, or a READ replayed:
		// re-requested from a PSN inside its responses, Linux rxe sends
		// MIDDLE...LAST from there (rxe_resp.c duplicate_request), whose
		// LAST has the PSN of the LAST already seen.
		ps.Retransmits++
		return
	}
	ps.LastPSN = psn
	if wire.PSNCompare(psn, s.respHigh) > 0 {
		s.respHigh = psn
	}
	if op.IsReadResp() {
		s.readNext = wire.PSNAdd(psn, 1)
		c.order(n, op, &s.respMsg)
		c.length(n, q, op, len(p.Payload))
	}
}

// order checks that op may follow the message state *m and advances it.
func (c *checker) order(n int, op wire.Opcode, m *msgState) {
	kind := msgKind(op)
	inMsg := *m != msgUnknown && *m != msgNone
	switch {
	case op.IsFirst() || op.IsOnly():
		if inMsg {
			c.bad(n, "opcode sequence: %v inside an unfinished %v message", op, *m)
		}
	case *m == msgUnknown:
		// The capture began inside this message.
	case *m != kind:
		c.bad(n, "opcode sequence: %v without a preceding FIRST (in %v message)", op, *m)
		// Resynchronise on the next FIRST or ONLY rather than flag
		// every following packet of this message too.
		*m = msgUnknown
		return
	}
	switch {
	case op.IsFirst() || op.IsMiddle():
		*m = kind
	default:
		*m = msgNone
	}
}

// length checks a payload length against the path MTU, learning the MTU
// from the first FIRST or MIDDLE packet when CM did not announce it.
func (c *checker) length(n int, q *QP, op wire.Opcode, size int) {
	full := op.IsFirst() || op.IsMiddle()
	if q.MTU == 0 {
		if !full {
			return
		}
		if _, ok := wire.MTUEnum(size); !ok {
			c.bad(n, "length: %v carries %d bytes, not a path MTU", op, size)
			return
		}
		q.MTU = size
		return
	}
	switch {
	case full && size != q.MTU:
		c.bad(n, "length: %v carries %d bytes, path MTU %d", op, size, q.MTU)
	case op.IsLast() && (size < 1 || size > q.MTU):
		c.bad(n, "length: %v carries %d bytes, want 1..%d", op, size, q.MTU)
	case op.IsOnly() && size > q.MTU:
		c.bad(n, "length: %v carries %d bytes, path MTU %d", op, size, q.MTU)
	}
}

// cm follows rdma_cm connections through the CM MADs sent to QP1.
func (c *checker) cm(n int, p *wire.Packet) {
	var h wire.MADHeader
	if err := h.Decode(p.Payload); err != nil {
		c.bad(n, "malformed MAD: %v", err)
		return
	}
	if !h.IsCM() {
		return
	}
	m := wire.NewCMMessage(h.AttrID)
	if m == nil {
		return
	}
	if err := m.Decode(p.Payload); err != nil {
		c.bad(n, "malformed CM attribute %#04x: %v", h.AttrID, err)
		return
	}
	find := func(keys ...connKey) *Connection {
		for _, k := range keys {
			if conn := c.conns[k]; conn != nil {
				return conn
			}
		}
		return nil
	}
	switch m := m.(type) {
	case *wire.CMReq:
		k := connKey{p.SrcIP, m.LocalCommID}
		if conn := c.conns[k]; conn != nil {
			conn.REQs++
			return
		}
		mtu, ok := wire.MTUFromEnum(m.PathMTU)
		if !ok {
			c.bad(n, "CM REQ: path MTU enum %d", m.PathMTU)
		}
		conn := &Connection{
			Frame: n, Active: p.SrcIP, Passive: p.DstIP, ActiveQPN: m.LocalQPN,
			ServiceID: m.ServiceID, PathMTU: mtu, REQs: 1, State: StateRequested,
		}
		c.conns[k] = conn
		c.rep.Connections = append(c.rep.Connections, conn)
	case *wire.CMRep:
		conn := find(connKey{p.DstIP, m.RemoteCommID})
		if conn == nil {
			return
		}
		conn.PassiveQPN = m.LocalQPN
		if conn.State == StateRequested {
			conn.State = StateReplied
		}
		if conn.PathMTU != 0 {
			c.setMTU(qpKey{conn.Active, conn.Passive, conn.PassiveQPN}, conn.PathMTU)
			c.setMTU(qpKey{conn.Passive, conn.Active, conn.ActiveQPN}, conn.PathMTU)
		}
	case *wire.CMRtu:
		if conn := find(connKey{p.SrcIP, m.LocalCommID}); conn != nil && conn.State == StateReplied {
			conn.State = StateEstablished
		}
	case *wire.CMRej:
		if conn := find(connKey{p.DstIP, m.RemoteCommID}, connKey{p.SrcIP, m.LocalCommID}); conn != nil {
			conn.State = StateRejected
			conn.RejectReason = m.Reason
		}
	case *wire.CMDreq:
		if conn := find(connKey{p.SrcIP, m.LocalCommID}, connKey{p.DstIP, m.RemoteCommID}); conn != nil && conn.State != StateDisconnected {
			conn.State = StateDisconnecting
		}
	case *wire.CMDrep:
		if conn := find(connKey{p.SrcIP, m.LocalCommID}, connKey{p.DstIP, m.RemoteCommID}); conn != nil {
			conn.State = StateDisconnected
		}
	}
}

func (c *checker) setMTU(k qpKey, mtu int) {
	c.mtus[k] = mtu
	if q := c.qps[k]; q != nil {
		q.MTU, q.MTUFromCM = mtu, true
	}
}
