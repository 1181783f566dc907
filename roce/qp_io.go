package roce

// A QP's share of the endpoint's frame loop: the frames it builds and
// the frames the endpoint hands it.

import (
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// output builds the QP's next frame, alternating between responder and
// requester so neither direction starves the other.
func (qp *QP) output(buf []byte, now time.Time) int {
	qp.respTurn = !qp.respTurn
	if qp.respTurn {
		if n := qp.respOutput(buf); n > 0 {
			return n
		}
		return qp.reqOutput(buf, now)
	}
	if n := qp.reqOutput(buf, now); n > 0 {
		return n
	}
	return qp.respOutput(buf)
}

// input hands a frame for this QP to its responder or requester after
// the checks rxe makes: a connected state, the peer's source address
// (check_addr) and the default P_Key.
func (qp *QP) input(p *wire.Packet, frameLen int, now time.Time) {
	if qp.state != QPStateRTR && qp.state != QPStateRTS ||
		p.SrcIP != qp.attr.AV.DstIP || p.BTH.PKey&0x7FFF != wire.DefaultPKey&0x7FFF {
		qp.cnt.dropped.Add(1)
		return
	}
	qp.cnt.rxPackets.Add(1)
	qp.cnt.rxBytes.Add(uint64(frameLen))
	qp.heard(now)
	switch op := p.BTH.Opcode; {
	case op.IsRequest():
		qp.respInput(p)
		qp.respArm(now)
	case op.IsResponse():
		qp.reqInput(p, now)
	}
}
