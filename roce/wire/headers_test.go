package wire

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestHeaderRoundTrip encodes each header, checks the wire bytes, and
// decodes them back.
func TestHeaderRoundTrip(t *testing.T) {
	type codec interface {
		Decode([]byte) error
		Encode([]byte)
	}
	tests := []struct {
		name  string
		in    codec
		out   codec
		wire  string
		equal func(a, b codec) bool
	}{
		{"bth", &BTH{Opcode: OpRCSendLast, SE: true, PadCnt: 3, PKey: 0xFFFF, BECN: true, DestQP: 0x000011, AckReq: true, PSN: 0xB92C8D},
			&BTH{}, "02 b0 ffff 40 000011 80 b92c8d",
			func(a, b codec) bool { return *a.(*BTH) == *b.(*BTH) }},
		{"bth all set", &BTH{Opcode: 0xFF, SE: true, MigReq: true, PadCnt: 3, TVer: 15, PKey: 0xFFFF, FECN: true, BECN: true, DestQP: PSNMask, AckReq: true, PSN: PSNMask},
			&BTH{}, "ff ff ffff c0 ffffff 80 ffffff",
			func(a, b codec) bool { return *a.(*BTH) == *b.(*BTH) }},
		{"reth", &RETH{VA: 0x0102030405060708, RKey: 0x0a0b0c0d, DMALen: 64},
			&RETH{}, "0102030405060708 0a0b0c0d 00000040",
			func(a, b codec) bool { return *a.(*RETH) == *b.(*RETH) }},
		{"aeth", &AETH{Syndrome: NakPSNSeq, MSN: 0x123456},
			&AETH{}, "60 123456",
			func(a, b codec) bool { return *a.(*AETH) == *b.(*AETH) }},
		{"deth", &DETH{QKey: GSIQKey, SrcQP: 1},
			&DETH{}, "80010000 00000001",
			func(a, b codec) bool { return *a.(*DETH) == *b.(*DETH) }},
		{"atomic eth", &AtomicETH{VA: 1, RKey: 2, SwapAdd: 3, Compare: 4},
			&AtomicETH{}, "0000000000000001 00000002 0000000000000003 0000000000000004",
			func(a, b codec) bool { return *a.(*AtomicETH) == *b.(*AtomicETH) }},
		{"atomic ack eth", &AtomicAckETH{OrigData: 0xFFFF0000FFFF0000},
			&AtomicAckETH{}, "ffff0000ffff0000",
			func(a, b codec) bool { return *a.(*AtomicAckETH) == *b.(*AtomicAckETH) }},
		{"mad header", &MADHeader{BaseVersion: 1, MgmtClass: 7, ClassVersion: 2, Method: 3, Status: 4, ClassSpecific: 5, TID: 6, AttrID: AttrRep, AttrMod: 8},
			&MADHeader{}, "01070203 0004 0005 0000000000000006 0013 0000 00000008",
			func(a, b codec) bool { return *a.(*MADHeader) == *b.(*MADHeader) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := mustHex(t, tt.wire)
			p := bytes.Repeat([]byte{0x5A}, len(want)) // stale bytes must be overwritten
			tt.in.Encode(p)
			if !bytes.Equal(p, want) {
				t.Fatalf("encoded % x, want % x", p, want)
			}
			if err := tt.out.Decode(p); err != nil {
				t.Fatal(err)
			}
			if !tt.equal(tt.in, tt.out) {
				t.Fatalf("decoded %+v, want %+v", tt.out, tt.in)
			}
			if err := tt.out.Decode(p[:len(p)-1]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("short decode: %v", err)
			}
		})
	}
}

func TestBTHDecodeIgnoresReserved(t *testing.T) {
	var b BTH
	if err := b.Decode(mustHex(t, "04 00 ffff 3f 000011 7f b92c8d")); err != nil {
		t.Fatal(err)
	}
	if b.FECN || b.BECN || b.AckReq || b.DestQP != 0x11 || b.PSN != 0xB92C8D {
		t.Fatalf("reserved bits leaked: %+v", b)
	}
}

func TestAETHSyndromes(t *testing.T) {
	tests := []struct {
		syn                uint8
		ack, rnr, nak      bool
		credits, timer, nc uint8
	}{
		{AETHAck, true, false, false, 0x1F, 0x1F, 0},
		{0x00, true, false, false, 0, 0, 0},
		{RNRNakSyndrome(0), false, true, false, 0, 0, 0},
		{RNRNakSyndrome(18), false, true, false, 18, 18, 0},
		{NakPSNSeq, false, false, true, 0, 0, NakPSNSeq},
		{NakInvalidRequest, false, false, true, 1, 1, NakInvalidRequest},
		{NakRemoteAccess, false, false, true, 2, 2, NakRemoteAccess},
		{NakRemoteOp, false, false, true, 3, 3, NakRemoteOp},
		{0x40, false, false, false, 0, 0, 0}, // reserved
	}
	for _, tt := range tests {
		a := AETH{Syndrome: tt.syn}
		if a.IsAck() != tt.ack || a.IsRNRNak() != tt.rnr || a.IsNak() != tt.nak || a.NakCode() != tt.nc {
			t.Errorf("syndrome %#x: ack %v rnr %v nak %v code %#x", tt.syn, a.IsAck(), a.IsRNRNak(), a.IsNak(), a.NakCode())
		}
		if tt.ack && a.Credits() != tt.credits || tt.rnr && a.RNRTimer() != tt.timer {
			t.Errorf("syndrome %#x: credits %d timer %d", tt.syn, a.Credits(), a.RNRTimer())
		}
	}
	if RNRNakSyndrome(0xFF) != 0x3F {
		t.Error("RNRNakSyndrome does not mask the timer")
	}
}

func TestPSN(t *testing.T) {
	addTests := []struct {
		psn  uint32
		n    int
		want uint32
	}{
		{0, 1, 1},
		{PSNMask, 1, 0},
		{0, -1, PSNMask},
		{10, 1 << 24, 10},
		{0xFFFFF0, 0x20, 0x10},
	}
	for _, tt := range addTests {
		if got := PSNAdd(tt.psn, tt.n); got != tt.want {
			t.Errorf("PSNAdd(%#x, %d) = %#x, want %#x", tt.psn, tt.n, got, tt.want)
		}
	}
	cmpTests := []struct {
		a, b uint32
		want int
		diff int
	}{
		{5, 5, 0, 0},
		{6, 5, 1, 1},
		{5, 6, -1, -1},
		{0, PSNMask, 1, 1},           // wrapped: 0 follows 0xFFFFFF
		{PSNMask, 0, -1, -1},         // and 0xFFFFFF precedes 0
		{0x7FFFFF, 0, 1, 0x7FFFFF},   // just inside the forward half
		{0x800000, 0, -1, -0x800000}, // half way round counts as behind
		{0x800001, 0, -1, -0x7FFFFF},
	}
	for _, tt := range cmpTests {
		if got := PSNCompare(tt.a, tt.b); got != tt.want {
			t.Errorf("PSNCompare(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := PSNDiff(tt.a, tt.b); got != tt.diff {
			t.Errorf("PSNDiff(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.diff)
		}
	}
}

func TestRNRDelay(t *testing.T) {
	tests := []struct {
		code uint8
		want time.Duration
	}{
		{0, 655360 * time.Microsecond},
		{1, 10 * time.Microsecond},
		{5, 60 * time.Microsecond},
		{0x12, 5120 * time.Microsecond}, // Ceph's min_rnr_timer
		{31, 491520 * time.Microsecond},
		{32 + 1, 10 * time.Microsecond}, // only 5 bits count
	}
	for _, tt := range tests {
		if got := RNRDelay(tt.code); got != tt.want {
			t.Errorf("RNRDelay(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
	for c := uint8(2); c < 32; c++ {
		if RNRDelay(c) <= RNRDelay(c-1) {
			t.Errorf("RNRDelay not increasing at %d", c)
		}
	}
}

func TestMTU(t *testing.T) {
	for e, mtu := range map[uint8]int{1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096} {
		if got, ok := MTUFromEnum(e); !ok || got != mtu {
			t.Errorf("MTUFromEnum(%d) = %d, %v", e, got, ok)
		}
		if got, ok := MTUEnum(mtu); !ok || got != e {
			t.Errorf("MTUEnum(%d) = %d, %v", mtu, got, ok)
		}
	}
	for _, e := range []uint8{0, 6, 255} {
		if _, ok := MTUFromEnum(e); ok {
			t.Errorf("MTUFromEnum(%d) ok", e)
		}
	}
	for _, mtu := range []int{0, 128, 1500, 8192} {
		if _, ok := MTUEnum(mtu); ok {
			t.Errorf("MTUEnum(%d) ok", mtu)
		}
	}
}

func TestOpcodeProperties(t *testing.T) {
	type props struct {
		ext                             int
		first, middle, last, only       bool
		send, write, readResp, req, rwr bool
	}
	tests := map[Opcode]props{
		OpRCSendFirst:      {0, true, false, false, false, true, false, false, true, true},
		OpRCSendMiddle:     {0, false, true, false, false, true, false, false, true, false},
		OpRCSendLastImm:    {4, false, false, true, false, true, false, false, true, false},
		OpRCSendOnly:       {0, false, false, false, true, true, false, false, true, true},
		OpRCWriteFirst:     {16, true, false, false, false, false, true, false, true, false},
		OpRCWriteLastImm:   {4, false, false, true, false, false, true, false, true, true},
		OpRCWriteOnlyImm:   {20, false, false, false, true, false, true, false, true, true},
		OpRCReadRequest:    {16, false, false, false, true, false, false, false, true, false},
		OpRCReadRespFirst:  {4, true, false, false, false, false, false, true, false, false},
		OpRCReadRespMiddle: {0, false, true, false, false, false, false, true, false, false},
		OpRCAck:            {4, false, false, false, true, false, false, false, false, false},
		OpRCAtomicAck:      {12, false, false, false, true, false, false, false, false, false},
		OpRCCompareSwap:    {28, false, false, false, true, false, false, false, true, false},
		OpRCSendOnlyInv:    {4, false, false, false, true, true, false, false, true, true},
		OpUCWriteFirst:     {16, true, false, false, false, false, true, false, true, false},
		OpUDSendOnly:       {8, false, false, false, true, true, false, false, true, true},
		OpUDSendOnlyImm:    {12, false, false, false, true, true, false, false, true, true},
	}
	for op, want := range tests {
		got := props{op.ExtHeaderLen(), op.IsFirst(), op.IsMiddle(), op.IsLast(), op.IsOnly(),
			op.IsSend(), op.IsWrite(), op.IsReadResp(), op.IsRequest(), op.ConsumesRecvWQE()}
		if got != want {
			t.Errorf("%v: %+v, want %+v", op, got, want)
		}
	}
	names := map[Opcode]string{
		OpRCSendOnly: "RC_SEND_ONLY", OpRCAck: "RC_ACKNOWLEDGE", OpUDSendOnly: "UD_SEND_ONLY",
		OpCNP: "CNP", 0x15: "Opcode(0x15)", 0xFE: "Opcode(0xfe)",
	}
	for op, want := range names {
		if got := op.String(); got != want {
			t.Errorf("String(%#x) = %q, want %q", uint8(op), got, want)
		}
	}
	// Every known opcode is exactly one of request, response, CNP; and
	// its transport matches bits 7:5.
	for i := range 256 {
		op := Opcode(i)
		if !op.Valid() {
			continue
		}
		n := 0
		for _, b := range []bool{op.IsRequest(), op.IsResponse(), op.IsCNP()} {
			if b {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%v: request %v response %v cnp %v", op, op.IsRequest(), op.IsResponse(), op.IsCNP())
		}
		if op.HasPayload() == (op.IsAck() || op.IsReadRequest() || op.IsAtomic() || op.IsAtomicAck()) {
			t.Errorf("%v: HasPayload %v", op, op.HasPayload())
		}
		if op.Transport() != Transport(i>>5) {
			t.Errorf("%v: transport %d", op, op.Transport())
		}
	}
}
