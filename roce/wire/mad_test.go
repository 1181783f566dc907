package wire

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// cmFrames returns the parsed QP1 packets of a capture with their frame numbers.
func cmFrames(t *testing.T, name string) (nums []int, pkts []Packet) {
	t.Helper()
	for _, f := range readCapture(t, name) {
		var p Packet
		if ParsePacket(f.data, &p) != nil || !p.BTH.Opcode.HasDETH() {
			continue
		}
		nums = append(nums, f.number)
		pkts = append(pkts, p)
	}
	return nums, pkts
}

func decodeCM(t *testing.T, mad []byte) (MADHeader, CMMessage) {
	t.Helper()
	var h MADHeader
	if err := h.Decode(mad); err != nil {
		t.Fatal(err)
	}
	if !h.IsCM() || h.Method != MADMethodSend || h.Status != 0 || h.AttrMod != 0 {
		t.Fatalf("mad header %+v", h)
	}
	m := NewCMMessage(h.AttrID)
	if m == nil {
		t.Fatalf("attribute %#x", h.AttrID)
	}
	if err := m.Decode(mad); err != nil {
		t.Fatal(err)
	}
	// Encoding what was decoded reproduces the MAD exactly.
	out := make([]byte, MADLen)
	if err := EncodeCM(out, h.TID, m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, mad) {
		t.Errorf("attribute %#x re-encodes as\n% x\nwant\n% x", h.AttrID, out, mad)
	}
	return h, m
}

func TestCMReqCapture(t *testing.T) {
	for _, name := range []string{captureRping, captureCMReq} {
		t.Run(name, func(t *testing.T) {
			nums, pkts := cmFrames(t, name)
			var tid uint64
			for i, p := range pkts {
				h, m := decodeCM(t, p.Payload)
				req, ok := m.(*CMReq)
				if !ok {
					continue
				}
				if tid == 0 {
					tid = h.TID
				}
				var cma CMAHeader
				if err := cma.Decode(req.PrivateData[:]); err != nil {
					t.Fatalf("frame %d: %v", nums[i], err)
				}
				ps, port := ServicePort(req.ServiceID)
				if ps != PSTCP || ServiceID(PSTCP, port) != req.ServiceID || req.ServiceID&^0xFFFF != 0x0000000001060000 {
					t.Errorf("frame %d: service id %#x", nums[i], req.ServiceID)
				}
				if cma.Version != CMAVersion || cma.IPVersion != 4 || cma.SrcAddr != p.SrcIP || cma.DstAddr != p.DstIP {
					t.Errorf("frame %d: cma header %+v, ip %v → %v", nums[i], cma, p.SrcIP, p.DstIP)
				}
				if cma.SrcPort == 0 || cma.SrcPort == port {
					t.Errorf("frame %d: cma source port %d, service port %d", nums[i], cma.SrcPort, port)
				}
				// The GIDs are the IPv4-mapped addresses of the IP header.
				if g := netip.AddrFrom16(req.PrimaryLocalGID); g.Unmap() != p.SrcIP || !g.Is4In6() {
					t.Errorf("frame %d: local gid %v", nums[i], g)
				}
				if g := netip.AddrFrom16(req.PrimaryRemoteGID); g.Unmap() != p.DstIP {
					t.Errorf("frame %d: remote gid %v", nums[i], g)
				}
				if req.TransportType != CMTransportRC || req.PKey != DefaultPKey || req.LocalQPN == 0 ||
					req.PrimaryLocalLID != 0xFFFF || req.PrimaryRemoteLID != 0xFFFF || req.HopLimit != p.TTL {
					t.Errorf("frame %d: req %+v", nums[i], req)
				}
				// rdma_cm over a 1500-byte netdev: path MTU 1024; rping
				// sets retry and RNR retry counts to 7.
				if mtu, _ := MTUFromEnum(req.PathMTU); mtu != 1024 || req.RetryCount != 7 || req.RNRRetry != 7 {
					t.Errorf("frame %d: mtu enum %d retry %d rnr retry %d", nums[i], req.PathMTU, req.RetryCount, req.RNRRetry)
				}
			}
			if tid == 0 {
				t.Fatal("no REQ in capture")
			}
		})
	}
}

// TestCMConnectionCapture follows rping's connection through REQ, REP,
// RTU, DREQ and DREP, and checks the CM fields against the RC traffic.
func TestCMConnectionCapture(t *testing.T) {
	nums, pkts := cmFrames(t, captureRping)
	if len(pkts) != 5 {
		t.Fatalf("%d CM frames, want 5", len(pkts))
	}
	var msgs []CMMessage
	var tids []uint64
	for _, p := range pkts {
		h, m := decodeCM(t, p.Payload)
		msgs = append(msgs, m)
		tids = append(tids, h.TID)
	}
	req, ok1 := msgs[0].(*CMReq)
	rep, ok2 := msgs[1].(*CMRep)
	rtu, ok3 := msgs[2].(*CMRtu)
	dreq, ok4 := msgs[3].(*CMDreq)
	drep, ok5 := msgs[4].(*CMDrep)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		t.Fatalf("messages %T %T %T %T %T", msgs[0], msgs[1], msgs[2], msgs[3], msgs[4])
	}
	active, passive := pkts[0].SrcIP, pkts[1].SrcIP
	if pkts[1].DstIP != active || pkts[2].SrcIP != active {
		t.Fatalf("REQ %v, REP %v→%v", active, passive, pkts[1].DstIP)
	}
	if rep.RemoteCommID != req.LocalCommID || rep.LocalCommID == 0 ||
		rtu.LocalCommID != req.LocalCommID || rtu.RemoteCommID != rep.LocalCommID {
		t.Errorf("comm ids: req %#x rep %#x/%#x rtu %#x/%#x", req.LocalCommID, rep.LocalCommID, rep.RemoteCommID, rtu.LocalCommID, rtu.RemoteCommID)
	}
	if tids[1] != tids[0] || tids[2] != tids[0] {
		t.Errorf("REP/RTU TIDs %#x %#x, REQ %#x", tids[1], tids[2], tids[0])
	}
	// rping's client disconnects: its DREQ names the server's QPN.
	if pkts[3].SrcIP != active || dreq.RemoteQPN != rep.LocalQPN || dreq.LocalCommID != req.LocalCommID {
		t.Errorf("dreq from %v: %+v", pkts[3].SrcIP, dreq)
	}
	if drep.LocalCommID != dreq.RemoteCommID || drep.RemoteCommID != dreq.LocalCommID {
		t.Errorf("drep %#x/%#x, dreq %#x/%#x", drep.LocalCommID, drep.RemoteCommID, dreq.LocalCommID, dreq.RemoteCommID)
	}
	if rep.RNRRetry != 7 || rep.QKey != 0 || rep.LocalCAGUID == 0 || rep.LocalCAGUID == req.LocalCAGUID {
		t.Errorf("rep %+v", rep)
	}
	// Each side's first RC request carries the PSN the other side asked
	// for: the passive side sends from the REQ's starting PSN, the
	// active side from the REP's, to the QPNs they announced.
	first := map[netip.Addr]*Packet{}
	for _, f := range readCapture(t, captureRping)[nums[2]:] {
		var p Packet
		if ParsePacket(f.data, &p) == nil && p.BTH.Opcode.IsRequest() && p.BTH.Opcode.Transport() == TransportRC && first[p.SrcIP] == nil {
			first[p.SrcIP] = &p
		}
	}
	if a := first[active]; a == nil || a.BTH.PSN != rep.StartingPSN || a.BTH.DestQP != rep.LocalQPN {
		t.Errorf("active side first request %+v, REP psn %#x qpn %#x", a, rep.StartingPSN, rep.LocalQPN)
	}
	if p := first[passive]; p == nil || p.BTH.PSN != req.StartingPSN || p.BTH.DestQP != req.LocalQPN {
		t.Errorf("passive side first request %+v, REQ psn %#x qpn %#x", p, req.StartingPSN, req.LocalQPN)
	}
}

func TestCMRoundTrip(t *testing.T) {
	gid := [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}
	var pd92 [92]byte
	pd92[0], pd92[91] = 1, 2
	tests := []CMMessage{
		&CMReq{
			LocalCommID: 1, ServiceID: ServiceID(PSTCP, 6800), LocalCAGUID: 2, LocalQKey: 3, LocalQPN: 0xFFFFFF,
			ResponderResources: 4, LocalEECN: 5, InitiatorDepth: 6, RemoteEECN: 7, RemoteCMRespTimeout: 31,
			TransportType: 3, E2EFlowCtl: true, StartingPSN: 0xABCDEF, LocalCMRespTimeout: 30, RetryCount: 7,
			PKey: 0xFFFF, PathMTU: 15, RDCExists: true, RNRRetry: 7, MaxCMRetries: 15, SRQ: true, ExtTransportType: 7,
			PrimaryLocalLID: 0xFFFF, PrimaryRemoteLID: 0xFFFE, PrimaryLocalGID: gid, PrimaryRemoteGID: gid,
			FlowLabel: 0xFFFFF, PacketRate: 63, TrafficClass: 0x60, HopLimit: 6, SL: 15, SubnetLocal: true,
			LocalACKTimeout: 31, AlternatePath: [44]byte{1, 43: 2}, PrivateData: pd92,
		},
		&CMRep{
			LocalCommID: 1, RemoteCommID: 2, QKey: 3, LocalQPN: 0xFFFFFF, LocalEECN: 0xFFFFFF, StartingPSN: 0xFFFFFF,
			ResponderResources: 7, InitiatorDepth: 8, TargetACKDelay: 31, FailoverAccepted: 3, E2EFlowCtl: true,
			RNRRetry: 7, SRQ: true, LocalCAGUID: 9, PrivateData: [196]byte{1, 195: 2},
		},
		&CMRtu{LocalCommID: 1, RemoteCommID: 2, PrivateData: [224]byte{1, 223: 2}},
		&CMDreq{LocalCommID: 1, RemoteCommID: 2, RemoteQPN: 0xFFFFFF, PrivateData: [220]byte{1, 219: 2}},
		&CMDrep{LocalCommID: 1, RemoteCommID: 2, PrivateData: [224]byte{1, 223: 2}},
		&CMRej{LocalCommID: 1, RemoteCommID: 2, MsgRejected: CMMsgOther, ARILen: 72, Reason: RejReasonConsumerDefined,
			ARI: [72]byte{1, 71: 2}, PrivateData: [148]byte{1, 147: 2}},
		&CMMra{LocalCommID: 1, RemoteCommID: 2, MsgMRAed: CMMsgRep, ServiceTimeout: 31, PrivateData: [222]byte{1, 221: 2}},
	}
	for _, m := range tests {
		mad := bytes.Repeat([]byte{0xEE}, MADLen) // Encode must overwrite reserved bytes
		if err := EncodeCM(mad, 0x1122334455667788, m); err != nil {
			t.Fatal(err)
		}
		var h MADHeader
		if err := h.Decode(mad); err != nil {
			t.Fatal(err)
		}
		want := MADHeader{BaseVersion: 1, MgmtClass: MgmtClassCM, ClassVersion: 2, Method: MADMethodSend, TID: 0x1122334455667788, AttrID: m.AttrID()}
		if h != want {
			t.Errorf("%T header %+v", m, h)
		}
		got := NewCMMessage(m.AttrID())
		if err := got.Decode(mad); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !equalCM(got, m) {
			t.Errorf("%T round trip:\n%+v\nwant\n%+v", m, got, m)
		}
		// All-0xEE reserved bytes would survive only if Encode skipped them.
		mad2 := make([]byte, MADLen)
		if err := EncodeCM(mad2, 0x1122334455667788, m); err != nil || !bytes.Equal(mad, mad2) {
			t.Errorf("%T: encoding depends on previous buffer contents", m)
		}
		if err := got.Decode(mad[:MADLen-1]); !errors.Is(err, ErrTruncated) {
			t.Errorf("%T short decode: %v", m, err)
		}
	}
	if err := EncodeCM(make([]byte, 100), 1, &CMRtu{}); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("EncodeCM short buffer: %v", err)
	}
}

func equalCM(a, b CMMessage) bool { return reflect.DeepEqual(a, b) }

func TestCMRejARILen(t *testing.T) {
	mad := make([]byte, MADLen)
	mad[MADHeaderLen+9] = 73 << 1
	var r CMRej
	if err := r.Decode(mad); !errors.Is(err, ErrBadMAD) {
		t.Fatalf("ARI length 73: %v", err)
	}
}

func TestCMAHeader(t *testing.T) {
	tests := []struct {
		name string
		h    CMAHeader
	}{
		{"ipv4", CMAHeader{IPVersion: 4, SrcPort: 40000, SrcAddr: netip.MustParseAddr("10.77.0.11"), DstAddr: netip.MustParseAddr("10.77.0.12")}},
		{"ipv6", CMAHeader{IPVersion: 6, SrcPort: 1, SrcAddr: netip.MustParseAddr("fe80::1"), DstAddr: netip.MustParseAddr("2001:db8::2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := bytes.Repeat([]byte{0xEE}, CMAHeaderLen)
			tt.h.Encode(p)
			var got CMAHeader
			if err := got.Decode(p); err != nil {
				t.Fatal(err)
			}
			if got != tt.h {
				t.Fatalf("got %+v, want %+v", got, tt.h)
			}
		})
	}
	// Wire layout of the IPv4 form.
	h := CMAHeader{IPVersion: 4, SrcPort: 0x1234, SrcAddr: netip.MustParseAddr("::ffff:1.2.3.4"), DstAddr: netip.MustParseAddr("5.6.7.8")}
	p := make([]byte, CMAHeaderLen)
	h.Encode(p)
	want := append([]byte{0, 0x40, 0x12, 0x34}, make([]byte, 32)...)
	copy(want[16:], []byte{1, 2, 3, 4})
	copy(want[32:], []byte{5, 6, 7, 8})
	if !bytes.Equal(p, want) {
		t.Fatalf("encoded % x", p)
	}
	for _, bad := range []struct {
		name string
		p    []byte
		want error
	}{
		{"short", want[:35], ErrTruncated},
		{"version", append([]byte{1}, want[1:]...), ErrBadRecord},
		{"ip version", append([]byte{0, 0x50}, want[2:]...), ErrBadRecord},
	} {
		var h CMAHeader
		if err := h.Decode(bad.p); !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		}
	}
}

func TestServiceID(t *testing.T) {
	if got := ServiceID(PSTCP, 7174); got != 0x0000000001061C06 {
		t.Fatalf("ServiceID = %#x", got)
	}
	if ps, port := ServicePort(0x0000000001061C06); ps != PSTCP || port != 7174 {
		t.Fatalf("ServicePort = %#x, %d", ps, port)
	}
}

func TestCephQPRecord(t *testing.T) {
	const rec = "0000:00000011:00b92c8d:00000000:00000000000000000000ffff0a4d000b\x00"
	var r CephQPRecord
	if err := r.Decode([]byte(rec)); err != nil {
		t.Fatal(err)
	}
	want := CephQPRecord{QPN: 0x11, PSN: 0xb92c8d, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 15: 11}}
	if r != want {
		t.Fatalf("got %+v", r)
	}
	out := make([]byte, CephQPRecordLen)
	if err := r.Encode(out); err != nil || string(out) != rec {
		t.Fatalf("Encode: %v %q", err, out)
	}
	upper := []byte("ABCD:0000001F:00B92C8D:FFFFFFFF:FE800000000000000000000000000001\x00")
	if err := r.Decode(upper); err != nil || r.LID != 0xABCD || r.PeerQPN != 0xFFFFFFFF || r.GID[0] != 0xFE {
		t.Fatalf("upper case: %v %+v", err, r)
	}
	for _, bad := range []struct {
		name string
		p    string
		want error
	}{
		{"short", rec[:64], ErrTruncated},
		{"no nul", rec[:64] + "x", ErrBadRecord},
		{"colon", "0000-" + rec[5:], ErrBadRecord},
		{"hex", "000g" + rec[4:], ErrBadRecord},
		{"gid hex", rec[:40] + "z" + rec[41:], ErrBadRecord},
	} {
		if err := r.Decode([]byte(bad.p)); !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		}
	}
	if err := r.Encode(make([]byte, 64)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("Encode into 64 bytes: %v", err)
	}
}
