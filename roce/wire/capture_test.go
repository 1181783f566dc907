package wire

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
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

// readCapture returns the frames of a capture in roce/testdata.
func readCapture(t testing.TB, name string) []capturedFrame {
	t.Helper()
	var out []capturedFrame
	for i, data := range roctest.ReadCapture(t, filepath.Join("..", "testdata", name)) {
		out = append(out, capturedFrame{i + 1, data})
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
