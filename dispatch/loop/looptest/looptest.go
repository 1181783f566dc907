// Package looptest holds what the poll loop's tests share, with fakes
// (package loop) or with DPDK (package dispatch): UDP frames tagged with
// their service, source lane and sequence number, the classifier that
// sorts them, and the check that each lane's frames arrive in order.
package looptest

import (
	"encoding/binary"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
)

// The test services: UDP to port 1000 is "a", to 2000 "b", the rest
// "other" (the default).
const (
	SvcA = iota
	SvcB
	SvcOther
	NumServices
)

// DstPort is each test service's UDP destination port.
var DstPort = [NumServices]uint16{SvcA: 1000, SvcB: 2000, SvcOther: 3000}

// Classifier returns the classifier of the test services.
func Classifier(tb testing.TB) *classify.Classifier {
	tb.Helper()
	c, err := classify.Compile([]classify.Rule{
		{Service: SvcA, Proto: 17, DstPorts: []classify.PortRange{{Lo: 1000, Hi: 1000}}},
		{Service: SvcB, Proto: 17, DstPorts: []classify.PortRange{{Lo: 2000, Hi: 2000}}},
	}, NumServices, SvcOther)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// FrameLen is the length of every test frame: Ethernet, IPv4, UDP and a
// tag (source lane and sequence number).
const FrameLen = 14 + 20 + 8 + 8

// Frame builds a UDP frame for service svc tagged with lane and seq.
func Frame(svc int, lane, seq uint32) []byte {
	f := make([]byte, FrameLen)
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], FrameLen-14)
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 40000+uint16(lane))
	binary.BigEndian.PutUint16(udp[2:], DstPort[svc])
	binary.BigEndian.PutUint16(udp[4:], 8+8)
	binary.BigEndian.PutUint32(f[42:], lane)
	binary.BigEndian.PutUint32(f[46:], seq)
	return f
}

// Frames builds n frames for svc from lane, numbered from seq0.
func Frames(svc int, lane uint32, seq0 uint32, n int) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = Frame(svc, lane, seq0+uint32(i))
	}
	return frames
}

// Tag is what Frame wrote into a frame.
type Tag struct {
	Svc       int // -1: no test service's port
	Lane, Seq uint32
}

// ReadTag reads back what Frame wrote.
func ReadTag(tb testing.TB, f []byte) Tag {
	tb.Helper()
	if len(f) != FrameLen {
		tb.Fatalf("frame of %d bytes, want %d", len(f), FrameLen)
	}
	tg := Tag{Svc: -1, Lane: binary.BigEndian.Uint32(f[42:]), Seq: binary.BigEndian.Uint32(f[46:])}
	for s, p := range DstPort {
		if binary.BigEndian.Uint16(f[36:]) == p {
			tg.Svc = s
		}
	}
	return tg
}

// FreeAtEnd fails tb on err, else frees v when tb ends, and returns v:
// for a constructor's results (a poll loop, before its lanes and pool).
func FreeAtEnd[T interface{ Free() }](tb testing.TB, v T, err error) T {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(v.Free)
	return v
}

// CheckOrder checks that the tags of each source lane arrive with
// rising sequence numbers.
func CheckOrder(tb testing.TB, what string, got []Tag) {
	tb.Helper()
	next := map[uint32]uint32{}
	for _, g := range got {
		if g.Seq < next[g.Lane] {
			tb.Fatalf("%s: lane %d: seq %d after %d: reordered", what, g.Lane, g.Seq, next[g.Lane]-1)
		}
		next[g.Lane] = g.Seq + 1
	}
}
