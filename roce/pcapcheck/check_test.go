package pcapcheck

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

const (
	captureRping = "rxe-rping-g1g2.pcapng"
	captureCMReq = "rxe-cm-req-unanswered.pcapng"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frames returns the frames of a pcapng capture.
func frames(t testing.TB, name string) [][]byte {
	t.Helper()
	r, err := pcapgo.NewNgReader(bytes.NewReader(readFile(t, name)), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, data)
	}
}

// pcapOf writes frames as a classic pcap capture of link type lt.
func pcapOf(t *testing.T, lt layers.LinkType, frames [][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := pcapgo.NewWriter(&b)
	if err := w.WriteFileHeader(65535, lt); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(f), Length: len(f)}
		if err := w.WritePacket(ci, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func check(t *testing.T, capture []byte) *Report {
	t.Helper()
	r, err := Check(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSharedCaptures(t *testing.T) {
	t.Run("rping", func(t *testing.T) {
		r := check(t, readFile(t, captureRping))
		if r.Bad() != 0 || r.Frames != 125 || r.RoCEFrames != 125 || r.Truncated {
			t.Fatalf("report: %d frames, %d RoCE, bad %v", r.Frames, r.RoCEFrames, r.BadFrames)
		}
		if len(r.Connections) != 1 {
			t.Fatalf("%d connections", len(r.Connections))
		}
		c := r.Connections[0]
		if c.State != StateDisconnected || c.PathMTU != 1024 || c.REQs != 1 || c.Frame != 1 ||
			c.ActiveQPN != 0x11 || c.PassiveQPN != 0x11 || c.ServiceID>>16 != wire.PSTCP {
			t.Errorf("connection %+v", c)
		}
		var rc []*QP
		for _, q := range r.QPs {
			if q.Transport == wire.TransportRC {
				rc = append(rc, q)
			}
		}
		if len(rc) != 2 {
			t.Fatalf("%d RC QP directions", len(rc))
		}
		total := 0
		for _, q := range rc {
			total += q.Frames
			if q.MTU != 1024 || !q.MTUFromCM {
				t.Errorf("%v → %v: MTU %d from CM %v", q.Src, q.Dst, q.MTU, q.MTUFromCM)
			}
			for _, s := range []PSNStream{q.Requests, q.Responses} {
				if s.Gaps != 0 || s.Retransmits != 0 || s.Frames == 0 {
					t.Errorf("%v → %v: stream %+v", q.Src, q.Dst, s)
				}
			}
			if q.Requests.Frames+q.Responses.Frames != q.Frames || q.Naks+q.RNRNaks != 0 {
				t.Errorf("%v → %v: %+v", q.Src, q.Dst, q)
			}
		}
		if total != 120 {
			t.Errorf("%d RC frames, want 120", total)
		}
	})
	t.Run("cm-req-unanswered", func(t *testing.T) {
		r := check(t, readFile(t, captureCMReq))
		if r.Bad() != 0 || r.Frames != 32 || r.RoCEFrames != 16 {
			t.Fatalf("report: %d frames, %d RoCE, bad %v", r.Frames, r.RoCEFrames, r.BadFrames)
		}
		if len(r.Connections) != 1 || r.Connections[0].REQs != 16 || r.Connections[0].State != StateRequested {
			t.Fatalf("connections %+v", r.Connections)
		}
		if q := r.QPs[0]; len(r.QPs) != 1 || q.DestQP != 1 || q.Requests.Gaps != 0 || q.Requests.Frames != 16 ||
			wire.PSNDiff(q.Requests.LastPSN, q.Requests.FirstPSN) != 15 {
			t.Fatalf("qps %+v", r.QPs)
		}
	})
}

// TestDamagedCapture corrupts or removes one frame of the rping capture
// and expects exactly that damage to be reported.
func TestDamagedCapture(t *testing.T) {
	orig := frames(t, captureRping)
	// Wireshark numbering: frame 10 is a SEND ONLY from 10.77.0.11; the
	// next request of that stream is frame 16.
	var p wire.Packet
	if err := wire.ParsePacket(orig[9], &p); err != nil || p.BTH.Opcode != wire.OpRCSendOnly {
		t.Fatalf("frame 10: %v %v", p.BTH.Opcode, err)
	}
	tests := []struct {
		name   string
		mutate func([][]byte) [][]byte
		number int
		reason string
	}{
		{"payload bit", func(fs [][]byte) [][]byte { fs[9][len(fs[9])-10] ^= 0x04; return fs }, 10, "bad ICRC"},
		{"icrc byte", func(fs [][]byte) [][]byte { fs[40][len(fs[40])-1]++; return fs }, 41, "bad ICRC"},
		{"psn", func(fs [][]byte) [][]byte { fs[9][53]++; wire.PutICRC(fs[9]); return fs }, 10, "psn gap"},
		{"tver", func(fs [][]byte) [][]byte { fs[9][43] |= 1; wire.PutICRC(fs[9]); return fs }, 10, "malformed"},
		{"truncated", func(fs [][]byte) [][]byte { fs[20] = fs[20][:50]; return fs }, 21, "malformed"},
		{"ip checksum", func(fs [][]byte) [][]byte { fs[30][24]++; return fs }, 31, "malformed"},
		{"removed request", func(fs [][]byte) [][]byte { return append(fs[:9:9], fs[10:]...) }, 15,
			"psn gap: expected 12135566 got 12135567"},
		{"removed ack", func(fs [][]byte) [][]byte { return append(fs[:10:10], fs[11:]...) }, 0, ""},
		{"duplicated request", func(fs [][]byte) [][]byte {
			return append(append(fs[:10:10], fs[9]), fs[10:]...)
		}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := make([][]byte, len(orig))
			for i := range orig {
				fs[i] = append([]byte(nil), orig[i]...)
			}
			r := check(t, pcapOf(t, layers.LinkTypeEthernet, tt.mutate(fs)))
			if tt.number == 0 {
				if r.Bad() != 0 {
					t.Fatalf("bad frames %v", r.BadFrames)
				}
				return
			}
			if r.Bad() != 1 || r.BadFrames[0].Number != tt.number || !strings.Contains(r.BadFrames[0].Reason, tt.reason) {
				t.Fatalf("bad frames %v, want frame %d %q", r.BadFrames, tt.number, tt.reason)
			}
		})
	}
}

func TestDuplicateCountsRetransmit(t *testing.T) {
	fs := frames(t, captureRping)
	fs = append(append(fs[:11:11], fs[9], fs[10]), fs[11:]...) // SEND and its ACK again
	r := check(t, pcapOf(t, layers.LinkTypeEthernet, fs))
	var req, resp int
	for _, q := range r.QPs {
		req += q.Requests.Retransmits
		resp += q.Responses.Retransmits
	}
	if r.Bad() != 0 || req != 1 || resp != 1 {
		t.Fatalf("bad %v, retransmits %d/%d", r.BadFrames, req, resp)
	}
}

func TestLinkTypes(t *testing.T) {
	eth := frames(t, captureRping)
	sll := make([][]byte, len(eth))
	raw := make([][]byte, len(eth))
	for i, f := range eth {
		h := make([]byte, 16)
		copy(h[14:], f[12:14]) // protocol = EtherType
		sll[i] = append(h, f[14:]...)
		raw[i] = f[14:]
	}
	for _, tt := range []struct {
		name   string
		lt     layers.LinkType
		frames [][]byte
	}{
		{"pcap ethernet", layers.LinkTypeEthernet, eth},
		{"linux sll", layers.LinkTypeLinuxSLL, sll},
		{"raw ip", layers.LinkTypeRaw, raw},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, pcapOf(t, tt.lt, tt.frames))
			if r.Bad() != 0 || r.RoCEFrames != 125 || len(r.Connections) != 1 {
				t.Fatalf("%d RoCE frames, bad %v", r.RoCEFrames, r.BadFrames)
			}
		})
	}
	if _, err := Check(bytes.NewReader(pcapOf(t, layers.LinkTypeIEEE802_11, eth[:1]))); err == nil {
		t.Error("802.11 capture accepted")
	}
}

func TestCheckInputErrors(t *testing.T) {
	if _, err := Check(strings.NewReader("not a capture at all")); !errors.Is(err, ErrFormat) {
		t.Errorf("garbage: %v", err)
	}
	if _, err := Check(strings.NewReader("")); err == nil {
		t.Error("empty input accepted")
	}
	full := readFile(t, captureRping)
	// The file ends with a 108-byte statistics block; cut inside the
	// last packet block. pcapgo's pcapng reader reports a cut block as a
	// clean end of file, so only the frame count tells.
	r, err := Check(bytes.NewReader(full[:len(full)-108-100]))
	if err != nil || r.Frames != 124 || r.Bad() != 0 {
		t.Fatalf("truncated pcapng: %v, %d frames, bad %v", err, r.Frames, r.BadFrames)
	}
	p := pcapOf(t, layers.LinkTypeEthernet, frames(t, captureRping))
	r, err = Check(bytes.NewReader(p[:len(p)-10]))
	if err != nil || !r.Truncated || r.Frames != 124 || r.Bad() != 0 {
		t.Fatalf("truncated pcap: %v, %d frames, truncated %v, bad %v", err, r.Frames, r.Truncated, r.BadFrames)
	}
}

// stream builds synthetic RC frames between two hosts.
type stream struct {
	t   *testing.T
	out [][]byte
}

func (s *stream) add(src, dst string, op wire.Opcode, psn uint32, payload int, mod func(*wire.Packet)) {
	h := wire.FrameHeader{SrcIP: netip.MustParseAddr(src), DstIP: netip.MustParseAddr(dst), TTL: 64, UDPSrc: 0xC000}
	p := wire.Packet{BTH: wire.BTH{Opcode: op, PKey: 0xFFFF, DestQP: 0x42, PSN: psn & wire.PSNMask}}
	p.AETH.Syndrome = wire.AETHAck
	if mod != nil {
		mod(&p)
	}
	buf := make([]byte, wire.FrameLen(op, payload, false))
	n, err := wire.BuildFrame(buf, &h, &p, make([]byte, payload))
	if err != nil {
		s.t.Fatal(err)
	}
	s.out = append(s.out, buf[:n])
}

func TestStreamRules(t *testing.T) {
	const a, b = "10.0.0.1", "10.0.0.2"
	read := func(n uint32) func(*wire.Packet) { return func(p *wire.Packet) { p.RETH.DMALen = n } }
	nak := func(syn uint8) func(*wire.Packet) { return func(p *wire.Packet) { p.AETH.Syndrome = syn } }
	tests := []struct {
		name  string
		build func(s *stream)
		bad   map[int]string // frame number → reason substring
	}{
		{"multi-packet send, learned MTU", func(s *stream) {
			s.add(a, b, wire.OpRCSendFirst, 100, 1024, nil)
			s.add(a, b, wire.OpRCSendMiddle, 101, 1024, nil)
			s.add(a, b, wire.OpRCSendLast, 102, 785, nil)
			s.add(b, a, wire.OpRCAck, 102, 0, nil)
		}, nil},
		{"psn wraps", func(s *stream) {
			s.add(a, b, wire.OpRCSendOnly, wire.PSNMask, 10, nil)
			s.add(a, b, wire.OpRCSendOnly, 0, 10, nil)
		}, nil},
		{"middle of wrong size", func(s *stream) {
			s.add(a, b, wire.OpRCWriteFirst, 1, 1024, nil)
			s.add(a, b, wire.OpRCWriteMiddle, 2, 1000, nil)
			s.add(a, b, wire.OpRCWriteLast, 3, 1025, nil)
		}, map[int]string{2: "length", 3: "length"}},
		{"first not a path MTU", func(s *stream) {
			s.add(a, b, wire.OpRCSendFirst, 1, 1000, nil)
		}, map[int]string{1: "not a path MTU"}},
		{"opcode order", func(s *stream) {
			s.add(a, b, wire.OpRCSendFirst, 1, 256, nil)
			s.add(a, b, wire.OpRCWriteMiddle, 2, 256, nil)
			s.add(a, b, wire.OpRCSendOnly, 3, 4, nil)
			s.add(a, b, wire.OpRCSendMiddle, 4, 256, nil)
		}, map[int]string{2: "without a preceding FIRST", 4: "without a preceding FIRST"}},
		{"only inside a message", func(s *stream) {
			s.add(a, b, wire.OpRCSendFirst, 1, 256, nil)
			s.add(a, b, wire.OpRCSendOnly, 2, 4, nil)
		}, map[int]string{2: "inside an unfinished SEND message"}},
		{"capture starts mid-message", func(s *stream) {
			s.add(a, b, wire.OpRCSendMiddle, 7, 1024, nil)
			s.add(a, b, wire.OpRCSendLast, 8, 1, nil)
		}, nil},
		{"go-back-N after NAK", func(s *stream) {
			s.add(a, b, wire.OpRCSendFirst, 10, 512, nil)
			s.add(a, b, wire.OpRCSendMiddle, 11, 512, nil)
			s.add(a, b, wire.OpRCSendMiddle, 12, 512, nil)
			s.add(b, a, wire.OpRCAck, 11, 0, nak(wire.NakPSNSeq))
			s.add(a, b, wire.OpRCSendMiddle, 11, 512, nil)
			s.add(a, b, wire.OpRCSendMiddle, 12, 512, nil)
			s.add(a, b, wire.OpRCSendLast, 13, 5, nil)
			s.add(b, a, wire.OpRCAck, 13, 0, nil)
		}, nil},
		{"read with unknown MTU", func(s *stream) {
			s.add(a, b, wire.OpRCReadRequest, 20, 0, read(4096))
			s.add(b, a, wire.OpRCReadRespFirst, 20, 1024, nil)
			s.add(b, a, wire.OpRCReadRespMiddle, 21, 1024, nil)
			s.add(b, a, wire.OpRCReadRespMiddle, 22, 1024, nil)
			s.add(b, a, wire.OpRCReadRespLast, 23, 1024, nil)
			s.add(a, b, wire.OpRCSendOnly, 24, 8, nil)
			s.add(b, a, wire.OpRCAck, 24, 0, nil)
		}, nil},
		{"read re-requested for its rest, after all its responses", func(s *stream) {
			// Linux rxe answers a READ re-requested from a PSN inside an
			// earlier READ's responses (rxe_resp.c duplicate_request, a
			// replay) with MIDDLE...LAST from that PSN, the LAST at the
			// PSN of the first LAST: a replay, not a LAST out of order.
			s.add(a, b, wire.OpRCReadRequest, 20, 0, read(3072))
			s.add(b, a, wire.OpRCReadRespFirst, 20, 1024, nil)
			s.add(b, a, wire.OpRCReadRespMiddle, 21, 1024, nil)
			s.add(b, a, wire.OpRCReadRespLast, 22, 1024, nil)
			s.add(a, b, wire.OpRCReadRequest, 21, 0, read(2048))
			s.add(b, a, wire.OpRCReadRespMiddle, 21, 1024, nil)
			s.add(b, a, wire.OpRCReadRespLast, 22, 1024, nil)
			s.add(a, b, wire.OpRCSendOnly, 23, 8, nil)
			s.add(b, a, wire.OpRCAck, 23, 0, nil)
		}, nil},
		{"gap after read", func(s *stream) {
			s.add(a, b, wire.OpRCReadRequest, 20, 0, read(1024))
			s.add(a, b, wire.OpRCSendOnly, 22, 8, nil) // a 1024-byte READ takes 1..4 PSNs
			s.add(a, b, wire.OpRCReadRequest, 23, 0, read(100))
			s.add(a, b, wire.OpRCSendOnly, 25, 8, nil)
		}, map[int]string{4: "psn gap: expected 24 got 25"}},
		{"gap inside read response", func(s *stream) {
			s.add(b, a, wire.OpRCReadRespFirst, 30, 256, nil)
			s.add(b, a, wire.OpRCReadRespMiddle, 31, 256, nil)
			s.add(b, a, wire.OpRCReadRespLast, 33, 10, nil)
		}, map[int]string{3: "psn gap in read response: expected 32 got 33"}},
		{"naks counted", func(s *stream) {
			s.add(b, a, wire.OpRCAck, 5, 0, nak(wire.RNRNakSyndrome(0)))
			s.add(b, a, wire.OpRCAck, 5, 0, nak(wire.NakRemoteAccess))
		}, nil},
		{"forward gap", func(s *stream) {
			s.add(a, b, wire.OpRCSendOnly, 1, 8, nil)
			s.add(a, b, wire.OpRCSendOnly, 2, 8, nil)
			s.add(a, b, wire.OpRCSendOnly, 5, 8, nil)
			s.add(a, b, wire.OpRCSendOnly, 6, 8, nil)
			s.add(a, b, wire.OpRCSendOnly, 3, 8, nil) // retransmission: not bad
		}, map[int]string{3: "psn gap: expected 3 got 5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &stream{t: t}
			tt.build(s)
			r := check(t, pcapOf(t, layers.LinkTypeEthernet, s.out))
			got := map[int]string{}
			for _, f := range r.BadFrames {
				got[f.Number] = f.Reason
			}
			if len(got) != len(tt.bad) || len(r.BadFrames) != len(tt.bad) {
				t.Fatalf("bad frames %v, want %v", r.BadFrames, tt.bad)
			}
			for n, want := range tt.bad {
				if !strings.Contains(got[n], want) {
					t.Errorf("frame %d: %q, want %q", n, got[n], want)
				}
			}
		})
	}
}

func TestNakCounts(t *testing.T) {
	s := &stream{t: t}
	s.add("10.0.0.2", "10.0.0.1", wire.OpRCAck, 5, 0, func(p *wire.Packet) { p.AETH.Syndrome = wire.RNRNakSyndrome(3) })
	s.add("10.0.0.2", "10.0.0.1", wire.OpRCAck, 6, 0, func(p *wire.Packet) { p.AETH.Syndrome = wire.NakPSNSeq })
	r := check(t, pcapOf(t, layers.LinkTypeEthernet, s.out))
	if len(r.QPs) != 1 || r.QPs[0].Naks != 1 || r.QPs[0].RNRNaks != 1 {
		t.Fatalf("qps %+v", r.QPs)
	}
}

func TestWriteTo(t *testing.T) {
	fs := frames(t, captureRping)
	fs = append(fs[:9:9], fs[10:]...)
	r := check(t, pcapOf(t, layers.LinkTypeEthernet, fs))
	var b bytes.Buffer
	n, err := r.WriteTo(&b)
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	out := b.String()
	for _, want := range []string{
		"capture: 124 frames, 124 RoCEv2, 1 bad\n",
		"10.77.0.11 → 10.77.0.12 service 0x0000000001061c06 (tcp port 7174): QPN 0x000011 ↔ 0x000011, MTU 1024, disconnected; first REQ at frame 1, REQs sent: 1\n",
		"10.77.0.11 → 10.77.0.12 QP 0x000011 RC, MTU 1024 (from CM): 59 frames\n",
		"10.77.0.11 → 10.77.0.12 QP 0x000001 UD: 3 frames\n",
		"requests:  19 frames, PSN 12135565 → 12135584, 0 retransmitted, 1 gaps\n",
		"RC_SEND_ONLY 19, ",
		"0 NAK, 0 RNR NAK",
		"bad frames:\n  frame 15: psn gap: expected 12135566 got 12135567\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
