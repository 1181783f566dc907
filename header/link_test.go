package header

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

var (
	macDst = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x12}
	macSrc = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x11}
)

// frameHex builds a frame from hex words after the two MAC addresses.
func frameHex(tb testing.TB, words ...string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.Join(words, ""))
	if err != nil {
		tb.Fatal(err)
	}
	return append(append(append([]byte(nil), macDst[:]...), macSrc[:]...), b...)
}

func TestParseLink(t *testing.T) {
	for _, tc := range []struct {
		name    string
		frame   []byte
		want    Link
		wantErr error
	}{
		{"untagged ipv4", frameHex(t, "0800", "45000014"), Link{EtherType: EtherTypeIPv4, Len: 14}, nil},
		{"untagged, header only", frameHex(t, "0806"), Link{EtherType: EtherTypeARP, Len: 14}, nil},
		{"802.1q", frameHex(t, "8100", "6064", "0800"), Link{EtherType: EtherTypeIPv4, VLANs: Dot1Q(0x6064), Len: 18}, nil},
		{"802.1ad over 802.1q", frameHex(t, "88a8", "00c8", "8100", "0064", "86dd"),
			Link{EtherType: EtherTypeIPv6, VLANs: QinQ(200, 100), Len: 22}, nil},
		{"802.1q over 802.1q", frameHex(t, "8100", "000a", "8100", "0014", "0806"),
			Link{EtherType: EtherTypeARP, VLANs: VLANs{N: 2, Tags: [MaxVLANs]VLANTag{{EtherTypeVLAN, 10}, {EtherTypeVLAN, 20}}}, Len: 22}, nil},
		{"802.1q inside 802.1ad, reversed", frameHex(t, "8100", "000a", "88a8", "0014", "0800"),
			Link{EtherType: EtherTypeIPv4, VLANs: VLANs{N: 2, Tags: [MaxVLANs]VLANTag{{EtherTypeVLAN, 10}, {EtherTypeQinQ, 20}}}, Len: 22}, nil},
		{"three tags", frameHex(t, "88a8", "0001", "8100", "0002", "8100", "0003", "0800"),
			Link{VLANs: VLANs{N: 2, Tags: [MaxVLANs]VLANTag{{EtherTypeQinQ, 1}, {EtherTypeVLAN, 2}}}}, ErrTooManyVLANs},
		{"short", frameHex(t, "08"), Link{}, ErrTruncatedEthernet},
		{"tag cut off", frameHex(t, "8100", "0064", "08"), Link{}, ErrTruncatedVLAN},
		{"second tag cut off", frameHex(t, "88a8", "0064", "8100"), Link{VLANs: VLANs{N: 1, Tags: [MaxVLANs]VLANTag{{EtherTypeQinQ, 100}}}}, ErrTruncatedVLAN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Link
			if err := ParseLink(tc.frame, &l); err != tc.wantErr {
				t.Fatalf("ParseLink = %v, want %v", err, tc.wantErr)
			}
			if l != tc.want {
				t.Errorf("link %+v, want %+v", l, tc.want)
			}
			et, off, ok := InnerEtherType(tc.frame)
			if ok != (tc.wantErr == nil) || ok && (et != tc.want.EtherType || off != tc.want.Len) {
				t.Errorf("InnerEtherType = %#04x, %d, %v; want %#04x, %d, %v", et, off, ok, tc.want.EtherType, tc.want.Len, tc.wantErr == nil)
			}
			if tc.wantErr != nil {
				return
			}
			// What PutLink writes for the parsed link is the frame's
			// link header.
			buf := make([]byte, MaxLinkHeaderLen)
			n := PutLink(buf, macDst, macSrc, &l.VLANs, l.EtherType)
			if n != l.Len || !bytes.Equal(buf[:n], tc.frame[:n]) {
				t.Errorf("PutLink = %x, want %x", buf[:n], tc.frame[:l.Len])
			}
			e := Ethernet(tc.frame)
			if e.Destination() != macDst || e.Source() != macSrc {
				t.Errorf("addresses %x → %x", e.Source(), e.Destination())
			}
		})
	}
}

func TestVLANTag(t *testing.T) {
	tag := Dot1Q(0x6064).Tags[0]
	if tag.VID() != 100 || tag.PCP() != 3 || tag.TPID != EtherTypeVLAN {
		t.Errorf("tag %+v: vid %d pcp %d", tag, tag.VID(), tag.PCP())
	}
	v := QinQ(1, 2)
	if v.Len() != 8 || LinkHeaderLen(&v) != 22 {
		t.Errorf("QinQ length %d, link header %d", v.Len(), LinkHeaderLen(&v))
	}
	// A zero TPID is written as 802.1Q.
	v = VLANs{N: 1, Tags: [MaxVLANs]VLANTag{{TCI: 5}}}
	buf := make([]byte, 18)
	PutLink(buf, macDst, macSrc, &v, EtherTypeARP)
	if got := hex.EncodeToString(buf[12:]); got != "810000050806" {
		t.Errorf("tag written as %s", got)
	}
}

func TestLinkNoAllocs(t *testing.T) {
	f := frameHex(t, "88a8", "00c8", "8100", "0064", "0800")
	var l Link
	buf := make([]byte, MaxLinkHeaderLen)
	if a := testing.AllocsPerRun(1000, func() {
		ParseLink(f, &l)
		InnerEtherType(f)
		PutLink(buf, macDst, macSrc, &l.VLANs, l.EtherType)
	}); a != 0 {
		t.Errorf("%v allocations", a)
	}
}

// FuzzParseLink checks that ParseLink reads inside the frame, agrees with
// InnerEtherType, and that PutLink writes back the header it read.
func FuzzParseLink(f *testing.F) {
	f.Add(frameHex(f, "0800"))
	f.Add(frameHex(f, "8100", "6064", "0806"))
	f.Add(frameHex(f, "88a8", "00c8", "8100", "0064", "86dd"))
	f.Add(frameHex(f, "88a8", "0001", "8100", "0002", "8100", "0003", "0800"))
	f.Fuzz(func(t *testing.T, frame []byte) {
		frame = frame[:len(frame):len(frame)]
		var l Link
		err := ParseLink(frame, &l)
		et, off, ok := InnerEtherType(frame)
		if ok != (err == nil) {
			t.Fatalf("ParseLink %v, InnerEtherType ok %v", err, ok)
		}
		if err != nil {
			if err != ErrTruncatedEthernet && err != ErrTruncatedVLAN && err != ErrTooManyVLANs {
				t.Fatalf("unknown error %v", err)
			}
			return
		}
		if et != l.EtherType || off != l.Len || l.Len > len(frame) || l.Len != LinkHeaderLen(&l.VLANs) || IsVLAN(et) {
			t.Fatalf("link %+v, InnerEtherType %#04x at %d", l, et, off)
		}
		buf := make([]byte, MaxLinkHeaderLen)
		e := Ethernet(frame)
		if n := PutLink(buf, e.Destination(), e.Source(), &l.VLANs, l.EtherType); !bytes.Equal(buf[:n], frame[:l.Len]) {
			t.Fatalf("PutLink wrote %x for %x", buf[:n], frame[:l.Len])
		}
	})
}
