package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// headerOf returns the FrameHeader that rebuilds the frame p was parsed from.
func headerOf(p *Packet) FrameHeader {
	return FrameHeader{
		SrcMAC: p.SrcMAC, DstMAC: p.DstMAC, VLANs: p.VLANs,
		SrcIP: p.SrcIP, DstIP: p.DstIP, TOS: p.TOS, TTL: p.TTL, IPID: p.IPID,
		FlowLabel: p.FlowLabel, UDPSrc: p.UDPSrc,
	}
}

func TestParseCaptures(t *testing.T) {
	// Opcode counts as Wireshark 3.x decodes the captures.
	tests := []struct {
		name string
		want map[Opcode]int
	}{
		{captureRping, map[Opcode]int{
			OpUDSendOnly: 5, OpRCSendOnly: 40, OpRCAck: 50,
			OpRCReadRequest: 10, OpRCReadRespOnly: 10, OpRCWriteOnly: 10,
		}},
		{captureCMReq, map[Opcode]int{OpUDSendOnly: 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[Opcode]int{}
			var p Packet
			for _, f := range readCapture(t, tt.name) {
				err := ParsePacket(f.data, &p)
				if !isRoCE(f.data) {
					if !errors.Is(err, ErrNotRoCE) {
						t.Errorf("frame %d: non-RoCE frame: err = %v, want ErrNotRoCE", f.number, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("frame %d: %v", f.number, err)
					continue
				}
				got[p.BTH.Opcode]++
				checkRxeFields(t, f.number, &p)
			}
			if len(got) != len(tt.want) {
				t.Errorf("opcodes %v, want %v", got, tt.want)
			}
			for op, n := range tt.want {
				if got[op] != n {
					t.Errorf("%v: %d frames, want %d", op, got[op], n)
				}
			}
		})
	}
}

// checkRxeFields checks what every rxe frame has in common.
func checkRxeFields(t *testing.T, n int, p *Packet) {
	t.Helper()
	b := &p.BTH
	if b.PKey != DefaultPKey || b.TVer != 0 || !p.SrcIP.Is4() || p.TTL != 64 {
		t.Errorf("frame %d: pkey %#x tver %d src %v ttl %d", n, b.PKey, b.TVer, p.SrcIP, p.TTL)
	}
	op := b.Opcode
	switch {
	case op.HasDETH():
		if b.DestQP != 1 || p.DETH.QKey != GSIQKey || p.DETH.SrcQP != 1 || len(p.Payload) != MADLen {
			t.Errorf("frame %d: UD to qp %d qkey %#x src qp %d, %d bytes", n, b.DestQP, p.DETH.QKey, p.DETH.SrcQP, len(p.Payload))
		}
	case op.HasAETH():
		if p.AETH.Syndrome != AETHAck || !p.AETH.IsAck() || p.AETH.IsNak() || p.AETH.IsRNRNak() {
			t.Errorf("frame %d: syndrome %#x", n, p.AETH.Syndrome)
		}
	case op.HasRETH():
		if p.RETH.DMALen != 64 || p.RETH.RKey == 0 || p.RETH.VA == 0 {
			t.Errorf("frame %d: reth %+v", n, p.RETH)
		}
		if op.IsWrite() && len(p.Payload) != int(p.RETH.DMALen) {
			t.Errorf("frame %d: write of %d bytes, reth says %d", n, len(p.Payload), p.RETH.DMALen)
		}
	}
	if op.IsRequest() && op.EndsMessage() && !b.AckReq {
		t.Errorf("frame %d: rxe request without AckReq", n)
	}
}

func TestRebuildCaptures(t *testing.T) {
	buf := make([]byte, 2048)
	for _, f := range roceFrames(t) {
		var p Packet
		if err := ParsePacket(f.data, &p); err != nil {
			t.Fatalf("frame %d: %v", f.number, err)
		}
		h := headerOf(&p)
		n, err := BuildFrame(buf, &h, &p, p.Payload)
		if err != nil {
			t.Fatalf("frame %d: %v", f.number, err)
		}
		if n != FrameLen(p.BTH.Opcode, len(p.Payload), false) {
			t.Errorf("frame %d: built %d bytes, FrameLen says %d", f.number, n, FrameLen(p.BTH.Opcode, len(p.Payload), false))
		}
		if !bytes.Equal(buf[:n], f.data) {
			t.Errorf("frame %d (%v): rebuilt\n% x\nwant\n% x", f.number, p.BTH.Opcode, buf[:n], f.data)
		}
	}
}

// rcFrame builds a valid RC frame for error tests.
func rcFrame(t testing.TB, op Opcode, payload []byte) []byte {
	t.Helper()
	h := FrameHeader{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"),
		TOS: 0x60, TTL: 6, IPID: 7, UDPSrc: 0xC001,
	}
	p := Packet{
		BTH:  BTH{Opcode: op, PKey: 0xFFFF, DestQP: 0x123, PSN: 0xFFFFFE, AckReq: true, SE: true},
		RETH: RETH{VA: 0x1000, RKey: 0xabcd, DMALen: uint32(len(payload))},
		AETH: AETH{Syndrome: AETHAck, MSN: 9},
		DETH: DETH{QKey: GSIQKey, SrcQP: 1},
		Imm:  0xdeadbeef,
	}
	buf := make([]byte, FrameLen(op, len(payload), false))
	n, err := BuildFrame(buf, &h, &p, payload)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestParsePacketErrors(t *testing.T) {
	good := rcFrame(t, OpRCSendOnlyImm, []byte("abcde")) // 3 pad bytes
	const ipOff, udpOff, bthOff = 14, 34, 42
	tests := []struct {
		name   string
		mutate func(f []byte) []byte
		want   error
	}{
		{"ok", func(f []byte) []byte { return f }, nil},
		{"ethernet padding ignored", func(f []byte) []byte { return append(f, 0, 0, 0, 0) }, nil},
		{"empty", func(f []byte) []byte { return nil }, ErrTruncated},
		{"short ethernet", func(f []byte) []byte { return f[:13] }, ErrTruncated},
		{"short ip", func(f []byte) []byte { return f[:30] }, ErrTruncated},
		{"cut inside payload", func(f []byte) []byte { return f[:len(f)-1] }, ErrTruncated},
		{"arp", func(f []byte) []byte { f[12], f[13] = 0x08, 0x06; return f }, ErrNotRoCE},
		{"tcp", func(f []byte) []byte { f[ipOff+9] = 6; return fixIPCsum(f) }, ErrNotRoCE},
		{"other udp port", func(f []byte) []byte { f[udpOff+3]++; return f }, ErrNotRoCE},
		{"fragment", func(f []byte) []byte { f[ipOff+6] |= 0x20; return fixIPCsum(f) }, ErrNotRoCE},
		{"ip version", func(f []byte) []byte { f[ipOff] = 0x55; return fixIPCsum(f) }, ErrNotRoCE},
		{"ip checksum", func(f []byte) []byte { f[ipOff+10]++; return f }, ErrBadChecksum},
		{"udp length", func(f []byte) []byte { f[udpOff+5]--; return f }, ErrBadLength},
		{"ip length short of headers", func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[ipOff+2:], 20+8+12+2)
			binary.BigEndian.PutUint16(f[udpOff+4:], 8+12+2)
			return fixIPCsum(f)
		}, ErrTruncated},
		{"tver", func(f []byte) []byte { f[bthOff+1] |= 1; return f }, ErrBadTVer},
		{"unknown opcode", func(f []byte) []byte { f[bthOff] = 0x15; return f }, ErrUnknownOpcode},
		{"pad beyond payload", func(f []byte) []byte {
			// An ACK with PadCnt 3 and no payload.
			a := rcFrame(t, OpRCAck, nil)
			a[bthOff+1] |= 0x30
			return a
		}, ErrBadPad},
		{"payload on ack", func(f []byte) []byte {
			a := rcFrame(t, OpRCAck, nil)
			a = append(a[:len(a)-4], 1, 2, 3, 4, 0, 0, 0, 0)
			binary.BigEndian.PutUint16(a[ipOff+2:], uint16(len(a)-ipOff))
			binary.BigEndian.PutUint16(a[udpOff+4:], uint16(len(a)-udpOff))
			a = fixIPCsum(a)
			if err := PutICRC(a); err != nil {
				t.Fatal(err)
			}
			return a
		}, ErrBadLength},
		{"icrc", func(f []byte) []byte { f[len(f)-1] ^= 0x40; return f }, ErrBadICRC},
		{"payload bit", func(f []byte) []byte { f[bthOff+BTHLen+ImmLen] ^= 1; return f }, ErrBadICRC},
		{"pad byte", func(f []byte) []byte { f[len(f)-5] = 1; return f }, ErrBadICRC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.mutate(append([]byte(nil), good...))
			var p Packet
			err := ParsePacket(f[:len(f):len(f)], &p)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ParsePacket: %v", err)
				}
				if string(p.Payload) != "abcde" || cap(p.Payload) != 5 || p.Imm != 0xdeadbeef || p.BTH.PadCnt != 3 {
					t.Fatalf("payload %q cap %d imm %#x padcnt %d", p.Payload, cap(p.Payload), p.Imm, p.BTH.PadCnt)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParsePacket: %v, want %v", err, tt.want)
			}
		})
	}
}

func fixIPCsum(f []byte) []byte {
	ip := f[14:34]
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^header.Checksum(ip))
	return f
}

func TestParseBadICRCStillDecodes(t *testing.T) {
	f := rcFrame(t, OpRCWriteFirst, make([]byte, 256))
	f[len(f)-2] ^= 0xFF
	var p Packet
	if err := ParsePacket(f, &p); !errors.Is(err, ErrBadICRC) {
		t.Fatalf("err = %v", err)
	}
	if p.BTH.Opcode != OpRCWriteFirst || p.BTH.PSN != 0xFFFFFE || p.RETH.RKey != 0xabcd || len(p.Payload) != 256 {
		t.Fatalf("packet not decoded: %+v", p.BTH)
	}
}

// TestParseVLAN builds and parses frames in the tag stacks the classifier
// hands to the RoCE ring, and refuses one tag more.
func TestParseVLAN(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vlans header.VLANs
	}{
		{"802.1q", header.Dot1Q(0x6064)},
		{"qinq", header.QinQ(0x00c8, 0x6064)},
		{"802.1q over 802.1q", header.VLANs{N: 2, Tags: [header.MaxVLANs]header.VLANTag{{TPID: header.EtherTypeVLAN, TCI: 10}, {TPID: header.EtherTypeVLAN, TCI: 20}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := FrameHeader{
				VLANs: tc.vlans,
				SrcIP: netip.MustParseAddr("::ffff:10.0.0.1"), DstIP: netip.MustParseAddr("::ffff:10.0.0.2"),
				TTL: 64, UDPSrc: 0xC000,
			}
			p := Packet{BTH: BTH{Opcode: OpRCReadRequest, PKey: 0xFFFF, DestQP: 5, PSN: 10}, RETH: RETH{VA: 1, RKey: 2, DMALen: 4096}}
			buf := make([]byte, 128)
			n, err := BuildFrame(buf, &h, &p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n != FrameLen(OpRCReadRequest, 0, false)+tc.vlans.Len() {
				t.Fatalf("length %d", n)
			}
			var q Packet
			if err := ParsePacket(buf[:n], &q); err != nil {
				t.Fatal(err)
			}
			if q.VLANs != tc.vlans || q.SrcIP != netip.MustParseAddr("10.0.0.1") || q.RETH != p.RETH {
				t.Fatalf("got %+v", q)
			}
			if !VerifyICRC(buf[:n]) {
				t.Fatal("VerifyICRC on tagged frame")
			}
			// Tags added up to one too many: refused, with its own error.
			three := bytes.Clone(buf[:12])
			for range header.MaxVLANs + 1 - int(tc.vlans.N) {
				three = append(three, 0x81, 0x00, 0x00, 0x07)
			}
			three = append(three, buf[12:n]...)
			if err := ParsePacket(three, &q); !errors.Is(err, ErrTooManyVLANs) || errors.Is(err, ErrNotRoCE) {
				t.Errorf("three tags: %v, want %v", err, ErrTooManyVLANs)
			}
			if _, err := FrameICRC(three); !errors.Is(err, ErrTooManyVLANs) {
				t.Errorf("FrameICRC of three tags: %v", err)
			}
			// Cut inside the tags: truncated.
			if err := ParsePacket(buf[:12+tc.vlans.Len()], &q); !errors.Is(err, ErrTruncated) {
				t.Errorf("cut after the tags: %v", err)
			}
		})
	}
	h := FrameHeader{VLANs: header.VLANs{N: 3}, SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2")}
	if _, err := BuildFrame(make([]byte, 128), &h, &Packet{BTH: BTH{Opcode: OpRCAck}}, nil); !errors.Is(err, ErrTooManyVLANs) {
		t.Errorf("BuildFrame with 3 tags: %v", err)
	}
}

func TestBuildFrameErrors(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fe80::1")
	tests := []struct {
		name    string
		src     netip.Addr
		dst     netip.Addr
		op      Opcode
		payload int
		buf     int
		want    error
	}{
		{"ok", v4, v4, OpRCSendOnly, 10, 100, nil},
		{"short buffer", v4, v4, OpRCSendOnly, 10, 69, ErrShortBuffer},
		{"unknown opcode", v4, v4, 0x15, 0, 100, ErrUnknownOpcode},
		{"payload on ack", v4, v4, OpRCAck, 4, 100, ErrBadLength},
		{"no address", netip.Addr{}, v4, OpRCAck, 0, 100, ErrBadAddress},
		{"mixed families", v4, v6, OpRCAck, 0, 100, ErrBadAddress},
		{"ipv4 too long", v4, v4, OpRCSendOnly, 65536, 70000, ErrBadLength},
		{"ipv6 too long", v6, v6, OpRCSendOnly, 65536, 70000, ErrBadLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := FrameHeader{SrcIP: tt.src, DstIP: tt.dst}
			p := Packet{BTH: BTH{Opcode: tt.op}}
			_, err := BuildFrame(make([]byte, tt.buf), &h, &p, make([]byte, tt.payload))
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("BuildFrame: %v, want %v", err, tt.want)
			}
		})
	}
}

// TestBuildParseOpcodes round-trips every opcode through BuildFrame and
// ParsePacket, over IPv4 and IPv6, with every pad length.
func TestBuildParseOpcodes(t *testing.T) {
	buf := make([]byte, 512)
	for op := range 256 {
		op := Opcode(op)
		if !op.Valid() {
			continue
		}
		for _, addr := range []string{"192.0.2.1", "2001:db8::1"} {
			for plen := range 5 {
				if !op.HasPayload() && plen > 0 {
					continue
				}
				a := netip.MustParseAddr(addr)
				h := FrameHeader{SrcIP: a, DstIP: a, TOS: 3, TTL: 9, IPID: 77, FlowLabel: 0xABCDE, UDPSrc: 1}
				if a.Is4() {
					h.FlowLabel = 0
				} else {
					h.IPID = 0
				}
				in := Packet{
					BTH:       BTH{Opcode: op, SE: true, MigReq: true, PKey: 0x8001, FECN: true, BECN: true, DestQP: 0xABCDEF, AckReq: true, PSN: 0x123456},
					RETH:      RETH{VA: 1 << 60, RKey: 3, DMALen: 99},
					AETH:      AETH{Syndrome: NakRemoteOp, MSN: 0xFFFFFF},
					DETH:      DETH{QKey: 5, SrcQP: 6},
					Atomic:    AtomicETH{VA: 7, RKey: 8, SwapAdd: 9, Compare: 10},
					AtomicAck: AtomicAckETH{OrigData: 11},
					Imm:       12,
					IETH:      13,
				}
				payload := bytes.Repeat([]byte{0xA5}, plen)
				n, err := BuildFrame(buf, &h, &in, payload)
				if err != nil {
					t.Fatalf("%v: %v", op, err)
				}
				var out Packet
				if err := ParsePacket(buf[:n], &out); err != nil {
					t.Fatalf("%v %s %d: %v", op, addr, plen, err)
				}
				if got := headerOf(&out); got != h {
					t.Errorf("%v: header %+v, want %+v", op, got, h)
				}
				want := in
				want.BTH.PadCnt = uint8(PadLen(plen))
				if !op.HasRETH() {
					want.RETH = RETH{}
				}
				if !op.HasAETH() {
					want.AETH = AETH{}
				}
				if !op.HasDETH() {
					want.DETH = DETH{}
				}
				if !op.HasAtomicETH() {
					want.Atomic = AtomicETH{}
				}
				if !op.HasAtomicAckETH() {
					want.AtomicAck = AtomicAckETH{}
				}
				if !op.HasImm() {
					want.Imm = 0
				}
				if !op.HasIETH() {
					want.IETH = 0
				}
				if out.BTH != want.BTH || out.RETH != want.RETH || out.AETH != want.AETH || out.DETH != want.DETH ||
					out.Atomic != want.Atomic || out.AtomicAck != want.AtomicAck || out.Imm != want.Imm || out.IETH != want.IETH {
					t.Errorf("%v: got %+v\nwant %+v", op, out, want)
				}
				if !bytes.Equal(out.Payload, payload) {
					t.Errorf("%v: payload %x", op, out.Payload)
				}
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	frames := roceFrames(t)
	var p Packet
	buf := make([]byte, 2048)
	tests := []struct {
		name string
		fn   func()
	}{
		{"ParsePacket", func() {
			for _, f := range frames {
				if ParsePacket(f.data, &p) != nil {
					panic("parse")
				}
			}
		}},
		{"ParsePacket error", func() {
			if ParsePacket(frames[0].data[:40], &p) == nil {
				panic("parse")
			}
		}},
		{"VerifyICRC", func() {
			for _, f := range frames {
				if !VerifyICRC(f.data) {
					panic("icrc")
				}
			}
		}},
		{"BuildFrame", func() {
			var p Packet
			if ParsePacket(frames[len(frames)/2].data, &p) != nil {
				panic("parse")
			}
			h := headerOf(&p)
			if _, err := BuildFrame(buf, &h, &p, p.Payload); err != nil {
				panic(err)
			}
		}},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(20, tt.fn); n != 0 {
			t.Errorf("%s: %v allocations per run", tt.name, n)
		}
	}
}

func BenchmarkParsePacket(b *testing.B) {
	f := rcFrame(b, OpRCSendMiddle, make([]byte, 1024))
	var p Packet
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ParsePacket(f, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildFrame(b *testing.B) {
	f := rcFrame(b, OpRCSendMiddle, make([]byte, 1024))
	var p Packet
	if err := ParsePacket(f, &p); err != nil {
		b.Fatal(err)
	}
	h := headerOf(&p)
	buf := make([]byte, len(f))
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildFrame(buf, &h, &p, p.Payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkICRC(b *testing.B) {
	for _, n := range []int{0, 1024, 4096} {
		f := rcFrame(b, OpRCSendMiddle, make([]byte, n))
		b.Run(string(rune('0'+n/1024))+"KiB", func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				if !VerifyICRC(f) {
					b.Fatal("icrc")
				}
			}
		})
	}
}
