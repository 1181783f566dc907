package trafficgen

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// RoCEv2 frames come from a small pool of reliable-connected queue pairs.
// Each carries either an ACK for the node's own requests or one packet of a
// SEND or RDMA WRITE message split at the path MTU, with consecutive PSNs.

// Base Transport Header opcodes (RC transport) used in the mix.
const (
	OpSendFirst  = 0x00
	OpSendMiddle = 0x01
	OpSendLast   = 0x02
	OpSendOnly   = 0x04
	OpWriteFirst = 0x06
	OpWriteMid   = 0x07
	OpWriteLast  = 0x08
	OpWriteOnly  = 0x0a
	OpAck        = 0x11
)

const (
	bthLen  = 12
	rethLen = 16
	aethLen = 4
	icrcLen = 4
	// roceMTU is the RoCE path MTU on a 1500-byte Ethernet MTU, the
	// largest IB MTU that fits.
	roceMTU = 1024
)

type qpKey struct {
	vlan bool
	slot int
}

type queuePair struct {
	peer        int
	srcPort     uint16
	destQP      uint32
	psn         uint32 // next request PSN from the peer
	ackPSN      uint32 // next PSN of the node's requests to acknowledge
	msn         uint32
	write       bool
	total, left int // bytes of the current message
	va          uint64
	rkey        uint32
}

func (g *generator) newQueuePair() *queuePair {
	r := g.r
	return &queuePair{
		peer: r.between(FirstPeer, LastPeer),
		// rxe derives the source port from a hash of the sender's QPN
		// into 0xC000-0xFFFF.
		srcPort: uint16(0xc000 + r.intn(0x4000)),
		destQP:  uint32(r.between(0x11, 0xffff)),
		psn:     r.uint32() & 0xffffff,
		ackPSN:  r.uint32() & 0xffffff,
	}
}

func (g *generator) roceFrame() Frame {
	r := g.r
	f := Frame{Kind: RoCEv2, Proto: layers.IPProtocolUDP}
	if r.chance(g.mix.VLAN) {
		f.VLAN, f.VLANID, f.Priority = true, StorageVLAN, RoCEPriority
	}
	key := qpKey{vlan: f.VLAN, slot: r.intn(8)}
	qp, ok := g.qps[key]
	if !ok {
		qp = g.newQueuePair()
		g.qps[key] = qp
	}

	if qp.left == 0 {
		switch {
		case r.chance(0.35):
			qp.total = 0
		case r.chance(0.55):
			qp.write, qp.total = false, r.between(16, 4096)
		default:
			qp.write, qp.total = true, r.between(512, 16384)
			qp.va = r.uint64() &^ 0xfff
			qp.rkey = r.uint32()
		}
		qp.left = qp.total
	}

	var ext []byte
	bth := BTH{DestQP: qp.destQP}
	if qp.total == 0 {
		bth.Opcode, bth.PSN = OpAck, qp.ackPSN
		qp.ackPSN = (qp.ackPSN + uint32(r.between(1, 4))) & 0xffffff
		// Syndrome 0x1f: ACK with unlimited credits, as rxe sends.
		ext = binary.BigEndian.AppendUint32(nil, 0x1f<<24|qp.msn&0xffffff)
		qp.msn++
	} else {
		first := qp.left == qp.total
		bth.Payload = min(roceMTU, qp.left)
		last := bth.Payload == qp.left
		bth.Opcode = rcOpcode(qp.write, first, last)
		if qp.write && first {
			ext = binary.BigEndian.AppendUint64(nil, qp.va)
			ext = binary.BigEndian.AppendUint32(ext, qp.rkey)
			ext = binary.BigEndian.AppendUint32(ext, uint32(qp.total))
		}
		bth.PSN, bth.AckReq = qp.psn, last
		qp.psn = (qp.psn + 1) & 0xffffff
		qp.left -= bth.Payload
		bth.PadCnt = uint8(-bth.Payload & 3)
	}

	// UDP payload: BTH, extension headers, payload, pad, ICRC placeholder.
	body := make([]byte, bthLen, bthLen+len(ext)+bth.Payload+int(bth.PadCnt)+icrcLen)
	body[0] = bth.Opcode
	body[1] = bth.PadCnt << 4 // SE=0, MigReq=0, TVer=0
	binary.BigEndian.PutUint16(body[2:], 0xffff)
	binary.BigEndian.PutUint32(body[4:], bth.DestQP) // byte 4 (FECN/BECN/resv) is 0
	psnWord := bth.PSN                               // AckReq is the top bit of this word
	if bth.AckReq {
		psnWord |= 1 << 31
	}
	binary.BigEndian.PutUint32(body[8:], psnWord)
	body = append(body, ext...)
	data := make([]byte, bth.Payload)
	r.fill(data)
	body = append(body, data...)
	body = append(body, make([]byte, int(bth.PadCnt)+icrcLen)...)

	// rxe sends a zero UDP checksum, relying on the ICRC: serialize UDP on
	// its own without checksums, then the rest of the frame with them.
	udp := &layers.UDP{SrcPort: layers.UDPPort(qp.srcPort), DstPort: PortRoCEv2}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, udp, gopacket.Payload(body)); err != nil {
		panic("trafficgen: serialize RoCEv2 UDP: " + err.Error())
	}
	ip := g.ipv4(qp.peer, layers.IPProtocolUDP, true)
	f.SrcIP, f.DstIP = PeerIPv4(qp.peer), NodeIPv4()
	f.SrcPort, f.DstPort, f.Payload = qp.srcPort, PortRoCEv2, len(body)
	ls := append(link(&f, PeerMAC(qp.peer), NodeMAC(), layers.EthernetTypeIPv4), ip, gopacket.Payload(buf.Bytes()))
	f.Data = serialize(ls...)

	ipOff := 14
	if f.VLAN {
		ipOff += 4
	}
	end := ipOff + 20 + 8 + len(body)
	bth.ICRC = icrc(f.Data[ipOff : end-icrcLen])
	binary.LittleEndian.PutUint32(f.Data[end-icrcLen:], bth.ICRC)
	f.BTH = bth
	return f
}

func rcOpcode(write, first, last bool) uint8 {
	switch {
	case first && last && write:
		return OpWriteOnly
	case first && last:
		return OpSendOnly
	case first && write:
		return OpWriteFirst
	case first:
		return OpSendFirst
	case last && write:
		return OpWriteLast
	case last:
		return OpSendLast
	case write:
		return OpWriteMid
	default:
		return OpSendMiddle
	}
}

// icrc returns the RoCEv2 invariant CRC of pkt, which runs from the start of
// the IPv4 header to the end of the BTH payload and pad. The CRC is the
// Ethernet CRC-32 over 8 bytes of 0xff (standing in for the InfiniBand LRH)
// followed by pkt with the fields that routers may change set to all ones:
// IPv4 TOS, TTL and header checksum, the UDP checksum, and BTH byte 4.
func icrc(pkt []byte) uint32 {
	buf := make([]byte, 8+len(pkt))
	for i := range 8 {
		buf[i] = 0xff
	}
	ip := buf[8:]
	copy(ip, pkt)
	ihl := int(ip[0]&0x0f) * 4
	ip[1], ip[8], ip[10], ip[11] = 0xff, 0xff, 0xff, 0xff
	udp := ip[ihl:]
	udp[6], udp[7] = 0xff, 0xff
	udp[8+4] = 0xff
	return crc32.ChecksumIEEE(buf)
}
