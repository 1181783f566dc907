package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"net/netip"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/header"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// referenceICRC computes the ICRC the slow, obvious way: copy the IP
// datagram, overwrite the variant fields with ones, prepend 8×0xFF, and
// run the standard CRC-32.
func referenceICRC(ipAndAbove []byte) uint32 {
	b := append([]byte(nil), ipAndAbove...)
	var ipLen int
	if b[0]>>4 == 6 {
		ipLen = 40
		b[0] |= 0x0F
		b[1], b[2], b[3] = 0xFF, 0xFF, 0xFF
		b[7] = 0xFF
	} else {
		ipLen = int(b[0]&0x0F) * 4
		b[1], b[8], b[10], b[11] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	b[ipLen+6], b[ipLen+7] = 0xFF, 0xFF
	b[ipLen+8+4] = 0xFF
	return crc32.ChecksumIEEE(append(bytes.Repeat([]byte{0xFF}, 8), b...))
}

func TestICRCPrefix(t *testing.T) {
	if got := crc32.Update(0, crc32.IEEETable, bytes.Repeat([]byte{0xFF}, 8)); got != icrcPrefix {
		t.Fatalf("crc of 8×0xFF = %#x, want %#x", got, uint32(icrcPrefix))
	}
}

// The ConnectX-4 Lx CNP capture from scapy's RoCE tests.
const cnpFrameHex = `e41d2dab2bc2 7cfe90643b32 0800 | 45c2 003c 718c 4000 4011 9161 0a001101 0a001201 |
	0000 12b7 0028 0000 | 81 00 ffff 40 000118 00 000000 | 00000000000000000000000000000000 | 82fd002a`

func TestICRCWorkedExamples(t *testing.T) {
	t.Run("cnp", func(t *testing.T) {
		f := mustHex(t, cnpFrameHex)
		masked := mustHex(t, `ffffffffffffffff 45ff003c718c4000ff11ffff0a0011010a001201 000012b70028ffff
			8100ffffff00011800000000 00000000000000000000000000000000`)
		if got, want := crc32.ChecksumIEEE(masked), uint32(0x2A00FD82); got != want {
			t.Fatalf("masked buffer crc %#x, want %#x", got, want)
		}
		if got := ICRC(f[14 : len(f)-4]); got != 0x2A00FD82 {
			t.Errorf("ICRC = %#x, want 0x2a00fd82", got)
		}
		if !VerifyICRC(f) {
			t.Error("VerifyICRC = false")
		}
		var p Packet
		if err := ParsePacket(f, &p); err != nil {
			t.Fatal(err)
		}
		if p.BTH.Opcode != OpCNP || !p.BTH.BECN || p.BTH.DestQP != 0x118 || len(p.Payload) != CNPPayloadLen {
			t.Errorf("parsed %+v", p.BTH)
		}
	})
	t.Run("uc-send-only", func(t *testing.T) {
		payload := []byte("F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P")
		mac := [6]byte{0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22}
		h := FrameHeader{
			SrcMAC: mac, DstMAC: mac,
			SrcIP: netip.MustParseAddr("192.168.0.7"), DstIP: netip.MustParseAddr("192.168.0.7"),
			TOS: 0x01, TTL: 64, IPID: 1144, UDPSrc: 49152,
		}
		p := Packet{BTH: BTH{Opcode: OpUCSendOnly, MigReq: true, PKey: 0xFFFF, DestQP: 211, PSN: 13571856}}
		buf := make([]byte, 128)
		n, err := BuildFrame(buf, &h, &p, payload)
		if err != nil {
			t.Fatal(err)
		}
		f := buf[:n]
		if n != 14+64 {
			t.Fatalf("frame length %d, want 78", n)
		}
		if got := binary.BigEndian.Uint16(f[24:]); got != 0xb4d5 {
			t.Errorf("ip checksum %#x, want 0xb4d5", got)
		}
		if f[14+20+8+1] != 0x60 {
			t.Errorf("bth byte 1 = %#x, want MigReq|PadCnt=2 (0x60)", f[43])
		}
		if got, want := f[n-4:], []byte{0x78, 0xf3, 0x53, 0xf3}; !bytes.Equal(got, want) {
			t.Errorf("icrc bytes % x, want % x", got, want)
		}
		// scapy fills in the UDP checksum (0xaca2); the ICRC masks it.
		binary.BigEndian.PutUint16(f[40:], 0xaca2)
		if !VerifyICRC(f) {
			t.Error("ICRC depends on the UDP checksum")
		}
	})
}

func TestICRCCaptures(t *testing.T) {
	frames := roceFrames(t)
	if len(frames) < 100 {
		t.Fatalf("only %d RoCE frames in the captures", len(frames))
	}
	for _, f := range frames {
		if !VerifyICRC(f.data) {
			t.Errorf("frame %d: ICRC does not verify", f.number)
		}
		body := f.data[14 : len(f.data)-4]
		if got, want := ICRC(body), referenceICRC(body); got != want {
			t.Errorf("frame %d: ICRC %#x, reference %#x", f.number, got, want)
		}
	}
}

// maskedOffsetsIPv4 are frame offsets of untagged IPv4 RoCE frames that
// the ICRC does not cover: TOS, TTL, IP checksum, UDP checksum, BTH byte 4.
var maskedOffsetsIPv4 = map[int]bool{15: true, 22: true, 24: true, 25: true, 40: true, 41: true, 46: true}

func TestICRCBitFlips(t *testing.T) {
	for _, f := range roceFrames(t)[:8] {
		end := len(f.data) - 4
		for off := 14; off < len(f.data); off++ {
			for _, mask := range []byte{0x01, 0x80} {
				g := append([]byte(nil), f.data...)
				g[off] ^= mask
				got := VerifyICRC(g)
				want := maskedOffsetsIPv4[off]
				if off >= end {
					want = false // the trailer itself
				}
				if got != want {
					t.Errorf("frame %d: flip %#x at offset %d: VerifyICRC = %v, want %v", f.number, mask, off, got, want)
				}
			}
		}
	}
}

func TestICRCIPv6(t *testing.T) {
	h := FrameHeader{
		SrcIP: netip.MustParseAddr("fe80::1"), DstIP: netip.MustParseAddr("fe80::2"),
		TOS: 0x60, TTL: 6, FlowLabel: 0x12345, UDPSrc: 0xC123,
	}
	p := Packet{BTH: BTH{Opcode: OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: 7, AckReq: true}}
	buf := make([]byte, 256)
	n, err := BuildFrame(buf, &h, &p, []byte("hello, ipv6"))
	if err != nil {
		t.Fatal(err)
	}
	f := buf[:n]
	if got, want := ICRC(f[14:n-4]), referenceICRC(f[14:n-4]); got != want {
		t.Fatalf("ICRC %#x, reference %#x", got, want)
	}
	masked := map[int]bool{14 + 1: true, 14 + 2: true, 14 + 3: true, 14 + 7: true, 54 + 6: true, 54 + 7: true, 62 + 4: true}
	for off := 14; off < n-4; off++ {
		g := append([]byte(nil), f...)
		g[off] ^= 0x01 // low bit: in byte 14 that is traffic class, masked
		want := masked[off] || off == 14
		if got := VerifyICRC(g); got != want {
			t.Errorf("flip at offset %d: VerifyICRC = %v, want %v", off, got, want)
		}
	}
	g := append([]byte(nil), f...)
	g[14] ^= 0x10 // version nibble: covered
	if VerifyICRC(g) {
		t.Error("version nibble not covered")
	}
}

func TestPutAppendICRC(t *testing.T) {
	f := mustHex(t, cnpFrameHex)
	g := append([]byte(nil), f[:len(f)-4]...)
	g, err := AppendICRC(g)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f, g) {
		t.Fatalf("AppendICRC:\n% x\nwant\n% x", g, f)
	}
	clear(g[len(g)-4:])
	if err := PutICRC(g); err != nil || !bytes.Equal(f, g) {
		t.Fatalf("PutICRC: %v\n% x", err, g)
	}
	if err := PutICRC(f[:20]); err == nil {
		t.Error("PutICRC accepted a truncated frame")
	}
	if VerifyICRC(nil) || VerifyICRC(f[:40]) {
		t.Error("VerifyICRC accepted a truncated frame")
	}
}

func TestICRCIPv4Options(t *testing.T) {
	f := rcFrame(t, OpRCSendOnly, []byte("options"))
	// Insert one 4-byte option (NOP, NOP, NOP, EOL) after the IPv4 header.
	g := append(append(append([]byte(nil), f[:34]...), 1, 1, 1, 0), f[34:]...)
	g[14] = 0x46
	binary.BigEndian.PutUint16(g[16:], uint16(len(g)-14))
	g[24], g[25] = 0, 0
	binary.BigEndian.PutUint16(g[24:], ^header.Checksum(g[14:38]))
	if err := PutICRC(g); err != nil {
		t.Fatal(err)
	}
	if got, want := binary.LittleEndian.Uint32(g[len(g)-4:]), referenceICRC(g[14:len(g)-4]); got != want {
		t.Fatalf("ICRC %#x, reference %#x", got, want)
	}
	var p Packet
	if err := ParsePacket(g, &p); err != nil || string(p.Payload) != "options" {
		t.Fatalf("ParsePacket: %v %q", err, p.Payload)
	}
	g[38+6] ^= 0xFF // UDP checksum, now 4 bytes further in: masked
	g[22] ^= 0xFF   // TTL: masked
	if !VerifyICRC(g) {
		t.Fatal("masked fields of an IPv4 header with options are covered")
	}
	g[37] ^= 1 // the option: covered
	if VerifyICRC(g) {
		t.Fatal("IPv4 option not covered")
	}
}
