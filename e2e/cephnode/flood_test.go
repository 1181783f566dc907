package cephnode

import (
	"context"
	"errors"
	"net"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/trafficgen"
)

// osdFlood builds n TCP segments to OSD ports of the node with a wrong
// TCP checksum: the daemon classifies them as OSD traffic and hands them
// to the kernel like any other, and the kernel drops them after it has
// paid for them, without answering.
func osdFlood(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, n int) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = trafficgen.TCPSegment(trafficgen.Segment{DstMAC: dstMAC, SrcMAC: srcMAC, Src: src, Dst: dst,
			SrcPort: uint16(40000 + i%1000), DstPort: 6800 + uint16(i%8), Seq: uint32(i), Payload: 1000, BadChecksum: true})
	}
	return frames
}

// flood sends frames from the client namespace over and over until ctx
// ends, from two packet sockets at once (one write per frame: a single
// sender barely outpaced the kernel path on two CPUs), and returns how
// many it sent.
func flood(ctx context.Context, v *testenv.VethNS, frames [][]byte) (int, error) {
	const senders = 2
	type result struct {
		sent int
		err  error
	}
	results := make(chan result, senders)
	for range senders {
		go func() {
			s, err := v.ListenPeer()
			if err != nil {
				results <- result{err: err}
				return
			}
			defer s.Close()
			sent := 0
			for ctx.Err() == nil {
				if err := s.Send(frames); err != nil {
					results <- result{sent, err}
					return
				}
				sent += len(frames)
			}
			results <- result{sent, nil}
		}()
	}
	var sent int
	var errs []error
	for range senders {
		r := <-results
		sent += r.sent
		errs = append(errs, r.err)
	}
	return sent, errors.Join(errs...)
}
