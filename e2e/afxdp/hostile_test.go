package afxdp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// fate is where a hostile frame must end up, and so which counter must
// count it.
type fate int

const (
	xdpFragment   fate = iota // passed to the kernel by the program: a fragment
	xdpMalformed              // passed by the program: headers cut short
	dispMalformed             // redirected, then the classifier's malformed (default service)
	epICRC                    // redirected, dropped by the endpoint: bad ICRC
	epMalformed               // ... not a valid RoCEv2 packet
	epNoQP                    // ... no such QP
	epUnsupported             // ... UC, CNP
	epAny                     // ... for a reason the mutation decides
	cmMalformed               // to QP1, dropped by the CM as malformed
	liveRequest               // to the serving QP, out of its window
	liveAck                   // to the serving QP, acknowledging nothing
	numFates
)

// offsets in an untagged IPv4 frame without options.
const (
	ipOff   = header.EthernetHeaderLen
	udpOff  = ipOff + header.IPv4MinimumSize
	bthOff  = udpOff + header.UDPMinimumSize
	maxSend = 1514 // the veth's MTU 1500 and the Ethernet header
)

// hostile builds the hostile frames, deterministically from its seed.
type hostile struct {
	t      *testing.T
	rng    *rand.Rand
	hdr    wire.FrameHeader
	frames [][]byte
	counts [numFates]int
}

func newHostile(t *testing.T, n *node) *hostile {
	h := &hostile{t: t, rng: rand.New(rand.NewPCG(20, 4791))}
	copy(h.hdr.DstMAC[:], n.v.HostMAC)
	copy(h.hdr.SrcMAC[:], n.v.PeerMAC)
	h.hdr.SrcIP, h.hdr.DstIP = netip.MustParseAddr(n.peerIP), netip.MustParseAddr(n.ip)
	h.hdr.TTL = 64
	return h
}

func (h *hostile) add(f fate, b []byte) {
	h.frames = append(h.frames, b)
	h.counts[f]++
}

func (h *hostile) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(h.rng.Uint32())
	}
	return b
}

// bogusQPN is a QPN the daemon never hands out (it counts up from 17).
func (h *hostile) bogusQPN() uint32 { return 0x800000 | h.rng.Uint32N(0x7FFFFF) }

// build is a valid frame of p with n random payload bytes.
func (h *hostile) build(p *wire.Packet, n int) []byte {
	h.t.Helper()
	if !p.BTH.Opcode.HasPayload() {
		n = 0
	}
	return h.frame(p, h.bytes(n))
}

// frame is a valid frame of p with payload.
func (h *hostile) frame(p *wire.Packet, payload []byte) []byte {
	h.t.Helper()
	h.hdr.UDPSrc = 0xC000 | uint16(h.rng.Uint32N(0x4000))
	buf := make([]byte, maxSend+64)
	k, err := wire.BuildFrame(buf, &h.hdr, p, payload)
	if err != nil {
		h.t.Fatalf("building %v: %v", p.BTH.Opcode, err)
	}
	return buf[:k]
}

// rc is an RC packet with a random valid opcode to qpn: random PSN,
// RETH with a huge length and a random R_Key, random AETH.
func (h *hostile) rc(qpn uint32) *wire.Packet {
	var op wire.Opcode
	for !op.Valid() || op.Transport() != wire.TransportRC {
		op = wire.Opcode(h.rng.Uint32N(0x18))
	}
	return &wire.Packet{
		BTH:    wire.BTH{Opcode: op, PKey: wire.DefaultPKey, DestQP: qpn, PSN: h.rng.Uint32N(1 << 24), AckReq: true},
		RETH:   wire.RETH{VA: h.rng.Uint64(), RKey: h.rng.Uint32(), DMALen: 0xFFFFFF00 | h.rng.Uint32N(0x100)},
		AETH:   wire.AETH{Syndrome: uint8(h.rng.Uint32()), MSN: h.rng.Uint32N(1 << 24)},
		Atomic: wire.AtomicETH{VA: h.rng.Uint64(), RKey: h.rng.Uint32()},
	}
}

// udp is a frame whose UDP datagram to 4791 carries payload as is.
func (h *hostile) udp(payload []byte) []byte {
	b := make([]byte, bthOff+len(payload))
	copy(b[0:], h.hdr.DstMAC[:])
	copy(b[6:], h.hdr.SrcMAC[:])
	binary.BigEndian.PutUint16(b[12:], header.EtherTypeIPv4)
	ip := b[ipOff:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-ipOff))
	binary.BigEndian.PutUint16(ip[4:], uint16(h.rng.Uint32()))
	ip[6] = 0x40 // DF
	ip[8], ip[9] = 64, 17
	src, dst := h.hdr.SrcIP.As4(), h.hdr.DstIP.As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(b[udpOff:], 0xC000|uint16(h.rng.Uint32N(0x4000)))
	binary.BigEndian.PutUint16(b[udpOff+2:], 4791)
	binary.BigEndian.PutUint16(b[udpOff+4:], uint16(len(b)-udpOff))
	copy(b[bthOff:], payload)
	fixIPv4(b)
	return b
}

// fixIPv4 recomputes the IPv4 header checksum of an untagged frame.
func fixIPv4(b []byte) {
	ihl := int(b[ipOff]&0xF) * 4
	binary.BigEndian.PutUint16(b[ipOff+10:], 0)
	binary.BigEndian.PutUint16(b[ipOff+10:], header.Checksum(b[ipOff:ipOff+ihl]))
}

// generate builds every hostile frame but those to the serving QP.
func (h *hostile) generate(capture [][]byte) {
	h.t.Helper()
	// Truncated BTHs: 0..11 bytes after a valid UDP header.
	for range 200 {
		h.add(epMalformed, h.udp(h.bytes(h.rng.IntN(wire.BTHLen))))
	}
	// Bad ICRCs on otherwise valid packets.
	for range 300 {
		b := h.build(h.rc(h.bogusQPN()), h.rng.IntN(512))
		b[len(b)-1-h.rng.IntN(wire.ICRCLen)] ^= byte(1 + h.rng.IntN(255))
		h.add(epICRC, b)
	}
	// Unknown opcodes and transport header versions, with valid ICRCs.
	for i := range 300 {
		b := h.build(h.rc(h.bogusQPN()), h.rng.IntN(256))
		if i%3 == 0 {
			b[bthOff+1] |= byte(1 + h.rng.IntN(15)) // TVer
		} else {
			op := wire.Opcode(h.rng.Uint32())
			for op.Valid() {
				op = wire.Opcode(h.rng.Uint32())
			}
			b[bthOff] = byte(op)
		}
		if err := wire.PutICRC(b); err != nil {
			h.t.Fatal(err)
		}
		h.add(epMalformed, b)
	}
	// UC and CNP: valid, not served.
	for i := range 100 {
		op := wire.Opcode(wire.OpUCSendFirst + wire.Opcode(h.rng.IntN(12)))
		n := h.rng.IntN(256)
		if i%4 == 0 {
			op, n = wire.OpCNP, wire.CNPPayloadLen
		}
		h.add(epUnsupported, h.build(&wire.Packet{BTH: wire.BTH{Opcode: op, PKey: wire.DefaultPKey, DestQP: h.bogusQPN()}}, n))
	}
	// Bogus QPNs: RC requests and responses (RETHs with huge lengths
	// and random R_Keys, ACKs and NAKs), UD to a QP other than 1 or to
	// QP1 with another Q_Key; some as large as the MTU allows.
	for i := range 400 {
		p := h.rc(h.bogusQPN())
		n := h.rng.IntN(1024)
		switch i % 8 {
		case 0:
			p.BTH.Opcode, p.BTH.DestQP = wire.OpUDSendOnly, 2+h.rng.Uint32N(1<<20)
			p.DETH = wire.DETH{QKey: wire.GSIQKey, SrcQP: 1}
		case 1:
			p.BTH.Opcode, p.BTH.DestQP = wire.OpUDSendOnly, 1
			p.DETH = wire.DETH{QKey: h.rng.Uint32() &^ 0x80000000, SrcQP: 1}
		case 2:
			p.BTH.Opcode = wire.OpRCSendOnly
			n = maxSend - wire.FrameLen(wire.OpRCSendOnly, 0, false)
		}
		h.add(epNoQP, h.build(p, n))
	}
	// Random bytes after a valid UDP header, up to the MTU.
	for i := range 300 {
		n := wire.BTHLen + h.rng.IntN(1024)
		if i%10 == 0 {
			n = maxSend - bthOff
		}
		h.add(epAny, h.udp(h.bytes(n)))
	}
	// Lengths: a UDP length of 0, or beyond the packet, or an IP total
	// length beyond the frame, are the classifier's malformed; a UDP
	// length short of the IP payload, or a bad IP checksum, the
	// endpoint's.
	for i := range 250 {
		b := h.build(h.rc(h.bogusQPN()), h.rng.IntN(256))
		switch i % 5 {
		case 0:
			binary.BigEndian.PutUint16(b[udpOff+4:], 0)
			h.add(dispMalformed, b)
		case 1:
			binary.BigEndian.PutUint16(b[udpOff+4:], uint16(len(b)-udpOff+1+h.rng.IntN(100)))
			h.add(dispMalformed, b)
		case 2:
			binary.BigEndian.PutUint16(b[ipOff+2:], uint16(len(b)-ipOff+1+h.rng.IntN(100)))
			fixIPv4(b)
			h.add(dispMalformed, b)
		case 3:
			binary.BigEndian.PutUint16(b[udpOff+4:], uint16(len(b)-udpOff-4))
			h.add(epMalformed, b)
		case 4:
			b[ipOff+10] ^= 0x5A
			h.add(epMalformed, b)
		}
	}
	// IP options to 4791: the program finds the UDP header past them.
	for range 100 {
		b := h.build(h.rc(h.bogusQPN()), h.rng.IntN(256))
		k := 1 + h.rng.IntN(10)
		opts := bytes.Repeat([]byte{1}, 4*k) // NOPs
		b = append(b[:udpOff:udpOff], append(opts, b[udpOff:]...)...)
		b[ipOff] = 0x40 | byte(5+k)
		binary.BigEndian.PutUint16(b[ipOff+2:], uint16(len(b)-ipOff))
		fixIPv4(b)
		h.add(epAny, b)
	}
	// Fragments to 4791: never RoCEv2, the kernel's.
	for i := range 150 {
		b := h.build(h.rc(h.bogusQPN()), h.rng.IntN(256))
		ff := uint16(0x2000) // MF
		if i%2 == 1 {
			ff = uint16(1 + h.rng.IntN(0x1FFF))
		}
		binary.BigEndian.PutUint16(b[ipOff+6:], ff)
		fixIPv4(b)
		h.add(xdpFragment, b)
	}
	// Headers the program cannot read: IHL below 5, a UDP header cut.
	for i := range 100 {
		b := h.build(h.rc(h.bogusQPN()), 0)
		if i%2 == 0 {
			b[ipOff] = 0x40 | byte(h.rng.IntN(5))
		} else {
			b = b[:udpOff+h.rng.IntN(header.UDPMinimumSize)]
			binary.BigEndian.PutUint16(b[ipOff+2:], uint16(len(b)-ipOff))
			fixIPv4(b)
		}
		h.add(xdpMalformed, b)
	}
	// CM MADs on QP1 the CM must drop: short, of a base version, class
	// or class version not the CM's, of another method, or of an
	// attribute the CM does not know.
	for i := range 250 {
		mad := h.bytes(wire.MADLen)
		mh := wire.MADHeader{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MgmtClassCM, ClassVersion: wire.CMClassVersion,
			Method: wire.MADMethodSend, TID: h.rng.Uint64(), AttrID: wire.AttrReq}
		switch i % 5 {
		case 0:
			mad = mad[:wire.MADHeaderLen+h.rng.IntN(wire.MADLen-wire.MADHeaderLen)]
		case 1:
			mh.BaseVersion = 2 + uint8(h.rng.IntN(200))
		case 2:
			mh.MgmtClass, mh.ClassVersion = 1+uint8(h.rng.IntN(6)), uint8(h.rng.IntN(2))
		case 3:
			mh.Method = wire.MADMethodSend + 1 + uint8(h.rng.IntN(100))
		case 4:
			for wire.NewCMMessage(mh.AttrID) != nil {
				mh.AttrID = uint16(h.rng.Uint32())
			}
		}
		mh.Encode(mad)
		p := &wire.Packet{BTH: wire.BTH{Opcode: wire.OpUDSendOnly, PKey: wire.DefaultPKey, DestQP: 1, PSN: h.rng.Uint32N(1 << 24)},
			DETH: wire.DETH{QKey: wire.GSIQKey, SrcQP: 1}}
		h.add(cmMalformed, h.frame(p, mad))
	}
	// A real capture's packets, readdressed to the daemon and to QPs it
	// does not have, then damaged: a few bytes of their BTH, extension
	// headers or payload changed, with the ICRC made good again half of
	// the time.
	for i := range 600 {
		var p wire.Packet
		if err := wire.ParsePacket(capture[i%len(capture)], &p); err != nil {
			h.t.Fatal(err)
		}
		p.BTH.DestQP = h.bogusQPN()
		b := h.frame(&p, p.Payload[:min(len(p.Payload), 1024)])
		for range 1 + h.rng.IntN(4) {
			b[bthOff+h.rng.IntN(len(b)-bthOff-wire.ICRCLen)] ^= byte(1 + h.rng.IntN(255))
		}
		// Never the serving QP: its QPN is small, these are not.
		b[bthOff+5] |= 0x80
		if i%2 == 0 {
			if err := wire.PutICRC(b); err != nil {
				h.t.Fatal(err)
			}
		}
		h.add(epAny, b)
	}
}

// live builds the frames to the serving QP qpn, from the client's own
// address: requests with a random PSN (out of the responder's window
// but by a chance of 2^-24 a frame) whose RETH asks for a huge length
// with a random R_Key, and ACKs for nothing.
func (h *hostile) live(qpn uint32) {
	for i := range 300 {
		p := h.rc(qpn)
		f := liveRequest
		switch i % 3 {
		case 0:
			p.BTH.Opcode = wire.OpRCSendOnly
		case 1:
			p.BTH.Opcode = wire.OpRCWriteOnly
		case 2:
			p.BTH.Opcode, p.AETH.Syndrome, f = wire.OpRCAck, 0x1F, liveAck
		}
		h.add(f, h.build(p, h.rng.IntN(64)))
	}
}

// shuffle mixes the frames of every kind; the counts stay.
func (h *hostile) shuffle() {
	h.rng.Shuffle(len(h.frames), func(i, j int) { h.frames[i], h.frames[j] = h.frames[j], h.frames[i] })
}

// roceFrames returns the untagged IPv4 RoCEv2 frames of a capture of
// rxe.
func roceFrames(t *testing.T, path string) [][]byte {
	t.Helper()
	var frames [][]byte
	var p wire.Packet
	for _, f := range roctest.ReadCapture(t, path) {
		if wire.ParsePacket(f, &p) == nil && p.VLANs.N == 0 && p.SrcIP.Is4() {
			frames = append(frames, f)
		}
	}
	if len(frames) < 10 {
		t.Fatalf("%s: %d RoCEv2 frames", path, len(frames))
	}
	return frames
}

// servingQP waits for the daemon's QP in RTS (the client connected)
// and returns its QPN.
func servingQP(t *testing.T, d *daemonproc.Proc, done <-chan error) uint32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("roce-ping ended before the replay: %v", err)
		default:
		}
		m, err := d.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			if !strings.HasPrefix(k, "cephdpdkd_roce_qp_state{") || v != 3 {
				continue
			}
			var qpn uint32
			if i := strings.Index(k, "qpn="); i >= 0 {
				fmt.Sscanf(k[i+len("qpn="):], "%d", &qpn)
			}
			if qpn != 0 {
				return qpn
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no QP of the daemon reached RTS: roce-ping did not connect")
	return 0
}

// caughtUp waits, up to a few seconds, for the daemon to have received
// every frame the program redirected, so that a burst never meets a
// full socket ring, which would drop frames uncounted: the sender is a
// test, not an attacker, and the counts must come out exact. A daemon
// that never catches up leaves the difference to the test's checks.
func caughtUp(t *testing.T, d *daemonproc.Proc, iface string) {
	t.Helper()
	for range 200 {
		m, err := d.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		red := daemonproc.Sum(m, "cephdpdkd_xdp_redirected_total", "interface="+iface)
		if red <= daemonproc.Sum(m, "cephdpdkd_port_rx_packets_total")+daemonproc.Sum(m, "cephdpdkd_port_rx_missed_total") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// delta is after's series name (labels matched as by Sum) less before's.
func delta(before, after map[string]float64, name string, want ...string) int {
	return int(daemonproc.Sum(after, name, want...) - daemonproc.Sum(before, name, want...))
}

// TestHostileRoCEXDP sends the daemon, in the af_xdp mode, a few thousand
// hostile RoCEv2 frames from its client's namespace while roce-ping
// runs: truncated, damaged and bogus packets, CM MADs it must drop,
// fragments, IP options, frames up to the MTU, and requests and ACKs to
// the client's own QP out of its window. Every ping must be answered,
// during and after; every frame must be counted where it ends: the
// program's fragments and malformed, the classifier's malformed, the
// endpoint's drops, the CM's; the daemon must stop with every mbuf back.
func TestHostileRoCEXDP(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	cfg, metrics := n.daemonConfig(t)

	h := newHostile(t, n)
	h.generate(roceFrames(t, "../../roce/testdata/rxe-rping-g1g2.pcapng"))

	d := daemonproc.Start(t, n.bin, cfg, metrics)
	// Several times as long as the replay takes, so that it runs throughout.
	const pings = 20000
	ping := n.pingCmd(t, pings)
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = ping.CombinedOutput()
		done <- pingResult(pings, out, err)
	}()
	qpn := servingQP(t, d, done)
	h.live(qpn)
	h.shuffle()
	before, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Bursts of 64, and no more than 512 frames ahead of the daemon:
	// well within the socket's ring of 1024.
	s, err := n.v.ListenPeer()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(h.frames); i += 64 {
		if err := s.Send(h.frames[i:min(i+64, len(h.frames))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if i%512 == 448 {
			caughtUp(t, d, n.v.HostIf)
		}
	}
	s.Close()
	t.Logf("%d hostile frames sent in %v: %v", len(h.frames), time.Since(start).Round(time.Millisecond), h.counts)
	select {
	case err := <-done:
		t.Fatalf("roce-ping ended before the replay did (not interleaved): %v", err)
	default:
	}
	time.Sleep(200 * time.Millisecond)
	mid, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Log(string(out[strings.LastIndex(string(out), "roce-ping"):]))
	// And after.
	n.ping(t, 20)
	after, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cephdpdkd_xdp", "cephdpdkd_roce_endpoint_rx_dropped", "cephdpdkd_roce_cm_mads_dropped", "cephdpdkd_malformed", "cephdpdkd_port_rx"} {
		for name, v := range after {
			if strings.HasPrefix(name, k) && v != before[name] {
				t.Logf("%s %v (+%v)", name, v, v-before[name])
			}
		}
	}

	c := h.counts
	iface := "interface=" + n.v.HostIf
	redirected := len(h.frames) - c[xdpFragment] - c[xdpMalformed]
	if got := delta(before, after, "cephdpdkd_xdp_redirected_total", iface); got < redirected {
		t.Errorf("xdp redirected +%d, want at least the %d hostile frames to 4791 with readable headers", got, redirected)
	}
	for _, r := range []struct {
		reason string
		want   int
	}{{"fragment", c[xdpFragment]}, {"malformed", c[xdpMalformed]}, {"no_socket", 0}} {
		if got := delta(before, after, "cephdpdkd_xdp_passed_total", iface, "reason="+r.reason); got != r.want {
			t.Errorf("xdp passed %s +%d, want %d", r.reason, got, r.want)
		}
	}
	// Every redirected frame reached the port, or is counted missed.
	red := daemonproc.Sum(after, "cephdpdkd_xdp_redirected_total", iface)
	rx := daemonproc.Sum(after, "cephdpdkd_port_rx_packets_total") + daemonproc.Sum(after, "cephdpdkd_port_rx_missed_total")
	if red != rx {
		t.Errorf("xdp redirected %v frames, the port received or missed %v", red, rx)
	}
	if got := delta(before, after, "cephdpdkd_malformed_frames_total"); got != c[dispMalformed] {
		t.Errorf("classifier malformed +%d, want %d", got, c[dispMalformed])
	}
	const ep = "cephdpdkd_roce_endpoint_rx_dropped_total"
	want := c[epICRC] + c[epMalformed] + c[epNoQP] + c[epUnsupported] + c[epAny]
	if got := delta(before, after, ep); got != want {
		t.Errorf("endpoint drops +%d, want %d", got, want)
	}
	for _, r := range []struct {
		reason string
		want   int
	}{{"icrc", c[epICRC]}, {"malformed", c[epMalformed]}, {"no_qp", c[epNoQP]}, {"unsupported", c[epUnsupported]}} {
		if got := delta(before, after, ep, "reason="+r.reason); got < r.want {
			t.Errorf("endpoint drops %s +%d, want at least %d", r.reason, got, r.want)
		}
	}
	const cm = "cephdpdkd_roce_cm_mads_dropped_total"
	if got := delta(before, after, cm, "reason=malformed") + delta(before, after, cm, "reason=inbox_full"); got != c[cmMalformed] {
		t.Errorf("CM MADs dropped malformed or inbox full +%d, want %d", got, c[cmMalformed])
	}

	// The serving QP's counters, read while it was there: each request
	// out of its window is a duplicate or ahead of sequence, each ACK
	// for nothing stale (the client's own retransmissions add to both).
	q := fmt.Sprintf("qpn=%d", qpn)
	if got := delta(before, mid, "cephdpdkd_roce_out_of_sequence_total", q) + delta(before, mid, "cephdpdkd_roce_duplicate_requests_total", q); got < c[liveRequest] {
		t.Errorf("serving QP: out of sequence and duplicate requests +%d, want at least the %d sent", got, c[liveRequest])
	}
	if got := delta(before, mid, "cephdpdkd_roce_stale_responses_total", q); got < c[liveAck] {
		t.Errorf("serving QP: stale responses +%d, want at least the %d ACKs for nothing", got, c[liveAck])
	}

	log, err := d.Stop(10 * time.Second)
	if err != nil || !strings.Contains(log, "all mbufs returned") {
		t.Fatalf("stop: %v\n%s", err, log)
	}
}
