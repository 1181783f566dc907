package wire

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket/pcapgo"
)

// Captures from Linux rxe hosts, shared with roce/pcapcheck.
const (
	captureRping = "rxe-rping-g1g2.pcapng"        // rping: CM REQ/REP/RTU, RC traffic, DREQ/DREP
	captureCMReq = "rxe-cm-req-unanswered.pcapng" // 16 REQs answered by ICMP port unreachable
)

// capturedFrame is one frame of a capture, numbered from 1 as Wireshark does.
type capturedFrame struct {
	number int
	data   []byte
}

func readCapture(t testing.TB, name string) []capturedFrame {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []capturedFrame
	for n := 1; ; n++ {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.CaptureLength != ci.Length {
			t.Fatalf("%s frame %d: snapped to %d of %d bytes", name, n, ci.CaptureLength, ci.Length)
		}
		out = append(out, capturedFrame{n, append([]byte(nil), data...)})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no frames", name)
	}
	return out
}

// isRoCE reports whether a frame is untagged IPv4/UDP to port 4791,
// judged independently of ParsePacket.
func isRoCE(f []byte) bool {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 {
		return false
	}
	ihl := int(f[14]&0x0F) * 4
	return len(f) >= 14+ihl+8 && binary.BigEndian.Uint16(f[14+ihl+2:]) == UDPPort
}

// roceFrames returns the RoCEv2 frames of both captures.
func roceFrames(t testing.TB) []capturedFrame {
	var out []capturedFrame
	for _, name := range []string{captureRping, captureCMReq} {
		for _, f := range readCapture(t, name) {
			if isRoCE(f.data) {
				out = append(out, f)
			}
		}
	}
	return out
}
