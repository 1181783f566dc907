package pcapcheck

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Report is the result of Check.
type Report struct {
	Frames      int  // frames in the capture
	RoCEFrames  int  // frames sent to UDP port 4791
	Truncated   bool // a pcap file ends inside a frame (pcapgo reads a cut pcapng block as EOF)
	QPs         []*QP
	Connections []*Connection
	BadFrames   []BadFrame
}

// BadFrame is a frame a conforming sender would not have sent, numbered
// from 1 as Wireshark does.
type BadFrame struct {
	Number int
	Reason string
}

// QP summarises the frames sent from Src to Dst's queue pair DestQP, in
// order of first appearance in the capture.
type QP struct {
	Src, Dst  netip.Addr
	DestQP    uint32
	Transport wire.Transport
	Frames    int
	Opcodes   map[wire.Opcode]int

	// Requests holds the SENDs, WRITEs, READ REQUESTs and atomics (and
	// UD datagrams); Responses the ACKs and READ responses, whose PSNs
	// follow the requests of the opposite direction.
	Requests, Responses PSNStream
	Naks, RNRNaks       int // NAKs and RNR NAKs among the responses

	// MTU is the path MTU the lengths were checked against: announced
	// by CM (MTUFromCM) or learned from the first FIRST/MIDDLE packet.
	MTU       int
	MTUFromCM bool

	st qpState
}

// PSNStream summarises the PSNs of one stream.
type PSNStream struct {
	Frames            int
	FirstPSN, LastPSN uint32 // LastPSN: last PSN that was not a retransmission
	Retransmits       int    // PSNs behind the stream's position
	Gaps              int    // forward jumps
}

// Connection states.
const (
	StateRequested     = "requested"
	StateReplied       = "replied"
	StateEstablished   = "established"
	StateRejected      = "rejected"
	StateDisconnecting = "disconnecting"
	StateDisconnected  = "disconnected"
)

// Connection is an rdma_cm connection seen through its CM MADs.
type Connection struct {
	Frame                 int // the first REQ
	Active, Passive       netip.Addr
	ActiveQPN, PassiveQPN uint32 // PassiveQPN is 0 until a REP is seen
	ServiceID             uint64
	PathMTU               int
	REQs                  int // REQs sent, first one included
	State                 string
	RejectReason          uint16
}

// Bad returns the number of bad frames.
func (r *Report) Bad() int { return len(r.BadFrames) }

// WriteTo writes a human-readable summary of r to w.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "capture: %d frames, %d RoCEv2, %d bad", r.Frames, r.RoCEFrames, r.Bad())
	if r.Truncated {
		b.WriteString(", file truncated inside a frame")
	}
	b.WriteString("\n")
	if len(r.Connections) > 0 {
		b.WriteString("connections:\n")
	}
	for _, c := range r.Connections {
		fmt.Fprintf(&b, "  %v → %v service %#016x", c.Active, c.Passive, c.ServiceID)
		if ps, port := wire.ServicePort(c.ServiceID); ps == wire.PSTCP && wire.ServiceID(ps, port) == c.ServiceID {
			fmt.Fprintf(&b, " (tcp port %d)", port)
		}
		fmt.Fprintf(&b, ": QPN %#06x", c.ActiveQPN)
		if c.PassiveQPN != 0 {
			fmt.Fprintf(&b, " ↔ %#06x", c.PassiveQPN)
		}
		fmt.Fprintf(&b, ", MTU %d, %s", c.PathMTU, c.State)
		if c.State == StateRejected {
			fmt.Fprintf(&b, " (reason %d)", c.RejectReason)
		}
		fmt.Fprintf(&b, "; first REQ at frame %d, REQs sent: %d\n", c.Frame, c.REQs)
	}
	if len(r.QPs) > 0 {
		b.WriteString("queue pairs:\n")
	}
	for _, q := range r.QPs {
		fmt.Fprintf(&b, "  %v → %v QP %#06x %s", q.Src, q.Dst, q.DestQP, transportName(q.Transport))
		if q.MTU != 0 {
			src := "learned"
			if q.MTUFromCM {
				src = "from CM"
			}
			fmt.Fprintf(&b, ", MTU %d (%s)", q.MTU, src)
		}
		fmt.Fprintf(&b, ": %d frames\n    opcodes:", q.Frames)
		ops := make([]wire.Opcode, 0, len(q.Opcodes))
		for op := range q.Opcodes {
			ops = append(ops, op)
		}
		slices.SortFunc(ops, func(a, b wire.Opcode) int { return cmp.Compare(a, b) })
		for i, op := range ops {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %v %d", op, q.Opcodes[op])
		}
		b.WriteString("\n")
		writeStream(&b, "requests", &q.Requests, "")
		writeStream(&b, "responses", &q.Responses, fmt.Sprintf(", %d NAK, %d RNR NAK", q.Naks, q.RNRNaks))
	}
	if len(r.BadFrames) > 0 {
		b.WriteString("bad frames:\n")
	}
	for _, f := range r.BadFrames {
		fmt.Fprintf(&b, "  frame %d: %s\n", f.Number, f.Reason)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

func writeStream(b *strings.Builder, name string, s *PSNStream, extra string) {
	if s.Frames == 0 {
		return
	}
	fmt.Fprintf(b, "    %-10s %d frames, PSN %d → %d, %d retransmitted, %d gaps%s\n",
		name+":", s.Frames, s.FirstPSN, s.LastPSN, s.Retransmits, s.Gaps, extra)
}

func transportName(t wire.Transport) string {
	switch t {
	case wire.TransportRC:
		return "RC"
	case wire.TransportUC:
		return "UC"
	case wire.TransportRD:
		return "RD"
	case wire.TransportUD:
		return "UD"
	case wire.TransportCNP:
		return "CNP"
	}
	return fmt.Sprintf("transport %d", t)
}
