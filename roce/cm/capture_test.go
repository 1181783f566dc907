package cm

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// readCapture returns the frames of a capture in roce/testdata; frame n
// (numbered from 1, as Wireshark does) is at index n−1.
func readCapture(t testing.TB, name string) [][]byte {
	return roctest.ReadCapture(t, filepath.Join("..", "testdata", name))
}

// decoded is a captured or built CM frame, decoded.
type decoded struct {
	pkt wire.Packet
	hdr wire.MADHeader
	mad []byte
}

func decodeCM(t testing.TB, frame []byte) decoded {
	t.Helper()
	var d decoded
	if err := wire.ParsePacket(frame, &d.pkt); err != nil {
		t.Fatalf("frame does not parse (ICRC included): %v", err)
	}
	if !wire.VerifyICRC(frame) {
		t.Fatal("bad ICRC")
	}
	if len(d.pkt.Payload) != wire.MADLen {
		t.Fatalf("MAD of %d bytes", len(d.pkt.Payload))
	}
	d.mad = d.pkt.Payload
	if err := d.hdr.Decode(d.mad); err != nil {
		t.Fatal(err)
	}
	return d
}

// captureEndpoint is our endpoint with the address a captured REQ was
// sent to, and the link end standing for the rxe host.
type captureEndpoint struct {
	ep   *roce.Endpoint
	m    *Manager
	peer *memlink.End
	now  time.Time
}

func newCaptureEndpoint(t *testing.T, mac [6]byte, ip netip.Addr) *captureEndpoint {
	t.Helper()
	ours, peer := memlink.New(memlink.Config{})
	ep, err := roce.NewEndpoint(roce.EndpointConfig{MAC: mac, IP: ip, IO: ours})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ep, Config{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	return &captureEndpoint{ep: ep, m: m, peer: peer, now: time.Unix(1_796_027_302, 0)}
}

// poll runs one round of the endpoint and its Manager.
func (ce *captureEndpoint) poll() { ce.ep.Poll(ce.now); ce.m.Poll(ce.now) }

// answer feeds frame to our endpoint, which must send back one frame:
// the CM message attr, which it decodes into msg.
func (ce *captureEndpoint) answer(t *testing.T, frame []byte, attr uint16, msg interface{ Decode(mad []byte) error }) decoded {
	t.Helper()
	out := ce.feed(t, frame)
	if len(out) != 1 {
		t.Fatalf("sent %d frames, want one with attribute %#x", len(out), attr)
	}
	d := decodeCM(t, out[0])
	if d.hdr.AttrID != attr || msg.Decode(d.mad) != nil {
		t.Fatalf("answered with attribute %#x, want %#x", d.hdr.AttrID, attr)
	}
	return d
}

// feed delivers frame to our endpoint and returns what it sends back.
func (ce *captureEndpoint) feed(t *testing.T, frame []byte) [][]byte {
	t.Helper()
	if ce.peer.SendBurst([][]byte{frame}) != 1 {
		t.Fatal("link full")
	}
	for range 3 {
		ce.poll()
	}
	var out [][]byte
	bufs := make([][]byte, 8)
	for {
		k := ce.peer.RecvBurst(bufs)
		if k == 0 {
			return out
		}
		for _, b := range bufs[:k] {
			out = append(out, append([]byte(nil), b...))
		}
	}
}

func TestCapturedReqAnswered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capture  string
		mac      [6]byte
		ip       string
		port     uint16
		realRep  int    // frame number of rxe's REP, 0 if none
		repPriv  []byte // what our application puts in the REP
		srcPort  uint16 // from tshark: the client's rdma_cm port
		qpn, psn uint32 // from tshark: the REQ's QPN and starting PSN
	}{
		{"rping", "rxe-rping-g1g2.pcapng", [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x12}, "10.77.0.12", 7174, 2, nil, 0x9392, 0x11, 0xf32083},
		{"unanswered", "rxe-cm-req-unanswered.pcapng", [6]byte{0x0a, 0xe3, 0xdf, 0x3e, 0xe2, 0x14}, "10.77.0.1", 7174, 0, []byte("rep private data"), 0xb7c7, 0x12, 0x9ca17d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := readCapture(t, tc.capture)
			reqFrame := frames[0]
			req := decodeCM(t, reqFrame)
			var creq wire.CMReq
			if req.hdr.AttrID != wire.AttrReq || creq.Decode(req.mad) != nil {
				t.Fatal("frame 1 is not a REQ")
			}
			ce := newCaptureEndpoint(t, tc.mac, netip.MustParseAddr(tc.ip))
			var got ConnRequest
			var qp *roce.QP
			var sess *session.Session
			err := ce.m.Listen(tc.port, func(r *ConnRequest) (Accept, error) {
				got = *r
				got.PrivateData = append([]byte(nil), r.PrivateData...)
				var err error
				cfg := session.DefaultConfig()
				cfg.BufferSize, cfg.SendBuffers, cfg.RecvBuffers = 4096, 4, 4
				if qp, err = session.NewQP(ce.ep.NewPD(), cfg); err != nil {
					t.Fatal(err)
				}
				if sess, err = session.New(qp, cfg); err != nil {
					t.Fatal(err)
				}
				return Accept{QP: qp, PrivateData: tc.repPriv}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var crep wire.CMRep
			rep := ce.answer(t, reqFrame, wire.AttrRep, &crep)

			// What the application was told, against tshark's decoding.
			wantReq := ConnRequest{
				Conn: got.Conn, Port: tc.port, RemoteAddr: netip.AddrPortFrom(req.pkt.SrcIP, tc.srcPort),
				LocalAddr: ce.ep.IP(), RemoteMAC: req.pkt.SrcMAC, RemoteQPN: tc.qpn, RemoteCommID: creq.LocalCommID,
				RemoteCAGUID: 0x505400fffe770011, StartingPSN: tc.psn, PathMTU: 1024,
				ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetry: 7, LocalACKTimeout: 0x13,
				TrafficClass: 0, HopLimit: 64, PrivateData: make([]byte, MaxReqPrivateData),
			}
			if got.Conn == nil || !equalReq(got, wantReq) {
				t.Errorf("ConnRequest\n got %+v\nwant %+v", got, wantReq)
			}

			// The REP, field by field, against the REQ and rdma_cm's rules.
			a := qp.Query()
			priv := make([]byte, MaxRepPrivateData)
			copy(priv, tc.repPriv)
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"mad class", rep.hdr.IsCM() && rep.hdr.Method == wire.MADMethodSend, true},
				{"tid", rep.hdr.TID, req.hdr.TID},
				{"remote comm id", crep.RemoteCommID, creq.LocalCommID},
				{"local comm id non-zero", crep.LocalCommID != 0, true},
				{"q_key", crep.QKey, uint32(0)},
				{"qpn", crep.LocalQPN, qp.QPN()},
				{"psn is the qp's receive psn", crep.StartingPSN, a.RQPSN},
				{"psn 24 bits", crep.StartingPSN <= wire.PSNMask, true},
				{"responder resources", crep.ResponderResources, creq.InitiatorDepth},
				{"initiator depth", crep.InitiatorDepth, creq.ResponderResources},
				{"target ack delay", crep.TargetACKDelay, uint8(15)},
				{"failover", crep.FailoverAccepted, uint8(0)},
				{"flow control", crep.E2EFlowCtl, false},
				{"rnr retry", crep.RNRRetry, uint8(7)},
				{"srq", crep.SRQ, false},
				{"ca guid", crep.LocalCAGUID, CAGUID(tc.mac)},
				{"private data", bytes.Equal(crep.PrivateData[:], priv), true},
				// The frame goes back the way the REQ came.
				{"dst mac", rep.pkt.DstMAC, req.pkt.SrcMAC},
				{"src mac", rep.pkt.SrcMAC, tc.mac},
				{"dst ip", rep.pkt.DstIP, req.pkt.SrcIP},
				{"src ip", rep.pkt.SrcIP, req.pkt.DstIP},
				{"ttl", rep.pkt.TTL, creq.HopLimit},
				{"tos", rep.pkt.TOS, creq.TrafficClass},
				{"udp source port (rxe's for qp1)", rep.pkt.UDPSrc, req.pkt.UDPSrc},
				{"opcode", rep.pkt.BTH.Opcode, wire.OpUDSendOnly},
				{"dest qp", rep.pkt.BTH.DestQP, uint32(1)},
				{"p_key", rep.pkt.BTH.PKey, uint16(wire.DefaultPKey)},
				{"q_key", rep.pkt.DETH.QKey, uint32(wire.GSIQKey)},
				{"src qp", rep.pkt.DETH.SrcQP, uint32(1)},
				// The QP, ready to receive from the REQ's sender.
				{"qp state", a.State, roce.QPStateRTR},
				{"qp dest qpn", a.DestQPN, creq.LocalQPN},
				{"qp path mtu", a.PathMTU, 1024},
				{"qp responder resources", a.MaxDestRdAtomic, int(creq.InitiatorDepth)},
				{"qp rnr timer", a.MinRNRTimer, uint8(DefaultMinRNRTimer)},
				{"qp av mac", a.AV.DstMAC, req.pkt.SrcMAC},
				{"qp av ip", a.AV.DstIP, req.pkt.SrcIP},
				{"qp av ttl", a.AV.TTL, creq.HopLimit},
				{"qp av tos", a.AV.TOS, creq.TrafficClass},
			} {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}

			// Where rxe's own REP must agree with ours (everything but
			// the random comm ID and PSN, and the QPN it happened to pick).
			if tc.realRep > 0 {
				real := decodeCM(t, frames[tc.realRep-1])
				var rrep wire.CMRep
				rrep.Decode(real.mad)
				mine := crep
				mine.LocalCommID, mine.StartingPSN, mine.LocalQPN = rrep.LocalCommID, rrep.StartingPSN, rrep.LocalQPN
				if mine != rrep {
					t.Errorf("REP differs from rxe's beyond comm id, psn and qpn:\n ours %+v\n rxe  %+v", crep, rrep)
				}
				if real.hdr != rep.hdr {
					t.Errorf("MAD header %+v, rxe's %+v", rep.hdr, real.hdr)
				}
				for _, c := range []struct {
					what      string
					got, want any
				}{
					{"dst mac", rep.pkt.DstMAC, real.pkt.DstMAC},
					{"src mac", rep.pkt.SrcMAC, real.pkt.SrcMAC},
					{"ips", [2]netip.Addr{rep.pkt.SrcIP, rep.pkt.DstIP}, [2]netip.Addr{real.pkt.SrcIP, real.pkt.DstIP}},
					{"ttl", rep.pkt.TTL, real.pkt.TTL},
					{"tos", rep.pkt.TOS, real.pkt.TOS},
					{"udp source port", rep.pkt.UDPSrc, real.pkt.UDPSrc},
					{"deth", rep.pkt.DETH, real.pkt.DETH},
				} {
					if c.got != c.want {
						t.Errorf("%s = %v, rxe's %v", c.what, c.got, c.want)
					}
				}
			}

			// A duplicate REQ gets the same REP.
			dup := ce.feed(t, reqFrame)
			if len(dup) != 1 || !bytes.Equal(decodeCM(t, dup[0]).mad, rep.mad) {
				t.Errorf("duplicate REQ: %d frames, same REP %v", len(dup), len(dup) == 1 && bytes.Equal(decodeCM(t, dup[0]).mad, rep.mad))
			}

			// The RTU rxe would send next establishes the connection.
			rtu := wire.CMRtu{LocalCommID: creq.LocalCommID, RemoteCommID: crep.LocalCommID}
			var mad [wire.MADLen]byte
			wire.EncodeCM(mad[:], req.hdr.TID, &rtu)
			if out := ce.feed(t, gsiFrame(t, req.pkt, mad[:])); len(out) != 0 {
				t.Errorf("RTU answered with %d frames", len(out))
			}
			a = qp.Query()
			if got.Conn.State() != StateEstablished || a.State != roce.QPStateRTS {
				t.Fatalf("after the RTU: %v, qp %v", got.Conn.State(), a.State)
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"send psn", a.SQPSN, creq.StartingPSN},
				{"timeout", a.Timeout, creq.LocalACKTimeout},
				{"retry count", a.RetryCnt, min(creq.RetryCount, DefaultMaxRetryCount)},
				{"rnr retry", a.RNRRetry, creq.RNRRetry},
				{"initiator depth", a.MaxRdAtomic, int(creq.ResponderResources)},
			} {
				if c.got != c.want {
					t.Errorf("rts %s = %v, want %v", c.what, c.got, c.want)
				}
			}
			_ = sess
		})
	}
}

func equalReq(a, b ConnRequest) bool { return reflect.DeepEqual(a, b) }

// gsiFrame builds a frame carrying mad from the sender of p back to it.
func gsiFrame(t *testing.T, p wire.Packet, mad []byte) []byte {
	t.Helper()
	hdr := wire.FrameHeader{SrcMAC: p.SrcMAC, DstMAC: p.DstMAC, SrcIP: p.SrcIP, DstIP: p.DstIP, TOS: p.TOS, TTL: p.TTL, UDPSrc: p.UDPSrc}
	q := wire.Packet{BTH: wire.BTH{Opcode: wire.OpUDSendOnly, PKey: wire.DefaultPKey, DestQP: 1, PSN: p.BTH.PSN + 1}, DETH: wire.DETH{QKey: wire.GSIQKey, SrcQP: 1}}
	buf := make([]byte, 512)
	n, err := wire.BuildFrame(buf, &hdr, &q, mad)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestCapturedReqRejected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		capture string
		mac     [6]byte
		ip      string
	}{
		{"rping", "rxe-rping-g1g2.pcapng", [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x12}, "10.77.0.12"},
		{"unanswered", "rxe-cm-req-unanswered.pcapng", [6]byte{0x0a, 0xe3, 0xdf, 0x3e, 0xe2, 0x14}, "10.77.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := readCapture(t, tc.capture)
			req := decodeCM(t, frames[0])
			var creq wire.CMReq
			creq.Decode(req.mad)
			ce := newCaptureEndpoint(t, tc.mac, netip.MustParseAddr(tc.ip))
			ce.m.Listen(7175, func(*ConnRequest) (Accept, error) {
				t.Fatal("accept called for another port")
				return Accept{}, nil
			})
			var crej wire.CMRej
			rej := ce.answer(t, frames[0], wire.AttrRej, &crej)
			if crej.Reason != RejInvalidServiceID || crej.MsgRejected != wire.CMMsgReq || crej.RemoteCommID != creq.LocalCommID ||
				crej.LocalCommID != 0 || rej.hdr.TID != req.hdr.TID || rej.pkt.DstMAC != req.pkt.SrcMAC || rej.pkt.DstIP != req.pkt.SrcIP {
				t.Errorf("REJ %+v tid %#x to %v/%v", crej, rej.hdr.TID, rej.pkt.DstMAC, rej.pkt.DstIP)
			}
			if ce.m.NumConns() != 0 || ce.ep.NumQPs() != 0 {
				t.Error("state left by a rejected REQ")
			}
		})
	}
}

// TestCapturedDreqUnknown: rxe's DREQ from the rping capture, arriving
// at an endpoint that has no such connection, gets a DREP identical to
// the one rxe's peer sent.
func TestCapturedDreqUnknown(t *testing.T) {
	frames := readCapture(t, "rxe-rping-g1g2.pcapng")
	dreq, realDrep := decodeCM(t, frames[123]), decodeCM(t, frames[124])
	if dreq.hdr.AttrID != wire.AttrDREQ || realDrep.hdr.AttrID != wire.AttrDREP {
		t.Fatal("frames 124/125 are not DREQ/DREP")
	}
	ce := newCaptureEndpoint(t, [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x12}, netip.MustParseAddr("10.77.0.12"))
	var cdrep wire.CMDrep
	drep := ce.answer(t, frames[123], wire.AttrDREP, &cdrep)
	if !bytes.Equal(drep.mad, realDrep.mad) {
		t.Errorf("DREP MAD differs from rxe's:\n ours %x\n rxe  %x", drep.mad[:32], realDrep.mad[:32])
	}
}

// TestDialReqMatchesRxe: the REQ our active side sends, from the rping
// client's address to the rping server, against the REQ rxe sent there.
// Fields that are random or the application's choice (comm ID, PSN,
// depths, source port, timeouts) are excluded.
func TestDialReqMatchesRxe(t *testing.T) {
	frames := readCapture(t, "rxe-rping-g1g2.pcapng")
	real := decodeCM(t, frames[0])
	var rreq wire.CMReq
	rreq.Decode(real.mad)

	ce := newCaptureEndpoint(t, real.pkt.SrcMAC, real.pkt.SrcIP)
	ce.m.Neigh().Learn(real.pkt.DstIP, real.pkt.DstMAC, ce.now)
	ce.poll()
	qp, err := session.NewQP(ce.ep.NewPD(), session.Config{BufferSize: 4096, SendBuffers: 2, RecvBuffers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ce.m.Dial(real.pkt.DstIP, 7174, qp, nil, Events{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ce.poll()
	}
	bufs := make([][]byte, 4)
	if k := ce.peer.RecvBurst(bufs); k != 1 {
		t.Fatalf("sent %d frames, want the REQ", k)
	}
	ours := decodeCM(t, bufs[0])
	var req wire.CMReq
	if ours.hdr.AttrID != wire.AttrReq || req.Decode(ours.mad) != nil {
		t.Fatalf("sent attribute %#x", ours.hdr.AttrID)
	}
	var cma, rcma wire.CMAHeader
	if err := cma.Decode(req.PrivateData[:]); err != nil {
		t.Fatal(err)
	}
	rcma.Decode(rreq.PrivateData[:])
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"local qpn", req.LocalQPN, qp.QPN()},
		{"starting psn 24 bits", req.StartingPSN <= wire.PSNMask, true},
		{"responder resources", req.ResponderResources, uint8(DefaultRdAtomic)},
		{"local ack timeout", req.LocalACKTimeout, uint8(DefaultTimeout)},
		{"cm response timeout", req.LocalCMRespTimeout, uint8(DefaultCMResponseTimeout)},
		{"source port in the ephemeral range", cma.SrcPort >= ephemeralLow && cma.SrcPort <= ephemeralHigh, true},
		{"comm id non-zero", req.LocalCommID != 0, true},
		// What must agree with rxe.
		{"service id", req.ServiceID, rreq.ServiceID},
		{"ca guid", req.LocalCAGUID, rreq.LocalCAGUID},
		{"q_key", req.LocalQKey, rreq.LocalQKey},
		{"transport", req.TransportType, rreq.TransportType},
		{"flow control", req.E2EFlowCtl, rreq.E2EFlowCtl},
		{"retry count", req.RetryCount, rreq.RetryCount},
		{"p_key", req.PKey, rreq.PKey},
		{"path mtu", req.PathMTU, rreq.PathMTU},
		{"rdc", req.RDCExists, rreq.RDCExists},
		{"rnr retry", req.RNRRetry, rreq.RNRRetry},
		{"max cm retries", req.MaxCMRetries, rreq.MaxCMRetries},
		{"srq", req.SRQ, rreq.SRQ},
		{"lids", [2]uint16{req.PrimaryLocalLID, req.PrimaryRemoteLID}, [2]uint16{rreq.PrimaryLocalLID, rreq.PrimaryRemoteLID}},
		{"gids", [2][16]byte{req.PrimaryLocalGID, req.PrimaryRemoteGID}, [2][16]byte{rreq.PrimaryLocalGID, rreq.PrimaryRemoteGID}},
		{"traffic class", req.TrafficClass, rreq.TrafficClass},
		{"hop limit", req.HopLimit, rreq.HopLimit},
		{"sl", req.SL, rreq.SL},
		{"subnet local", req.SubnetLocal, rreq.SubnetLocal},
		{"alternate path", req.AlternatePath, rreq.AlternatePath},
		{"cma version", cma.Version, rcma.Version},
		{"cma ip version", cma.IPVersion, rcma.IPVersion},
		{"cma addresses", [2]netip.Addr{cma.SrcAddr, cma.DstAddr}, [2]netip.Addr{rcma.SrcAddr, rcma.DstAddr}},
		{"user private data", req.PrivateData[wire.CMAHeaderLen:], rreq.PrivateData[wire.CMAHeaderLen:]},
		{"mad class", [4]uint8{ours.hdr.BaseVersion, ours.hdr.MgmtClass, ours.hdr.ClassVersion, ours.hdr.Method},
			[4]uint8{real.hdr.BaseVersion, real.hdr.MgmtClass, real.hdr.ClassVersion, real.hdr.Method}},
		{"dst mac", ours.pkt.DstMAC, real.pkt.DstMAC},
		{"udp source port", ours.pkt.UDPSrc, real.pkt.UDPSrc},
		{"ttl", ours.pkt.TTL, real.pkt.TTL},
		{"tos", ours.pkt.TOS, real.pkt.TOS},
		{"deth", ours.pkt.DETH, real.pkt.DETH},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}
