package wire

import "encoding/binary"

// extHeaders lists the extension headers in the IBA order, the order they
// follow the BTH: the opcode flag that calls for each, and its length.
// decodeExt and encodeExt switch on the flag rather than call through a
// table of functions, which would move the Packet to the heap.
var extHeaders = [...]struct {
	flag opFlags
	len  int
}{
	{fDETH, DETHLen},
	{fRETH, RETHLen},
	{fAtomicETH, AtomicETHLen},
	{fAETH, AETHLen},
	{fAtomicAckETH, AtomicAckETHLen},
	{fImm, ImmLen},
	{fIETH, IETHLen},
}

// ExtHeaderLen is the number of bytes of extension headers between the BTH
// and the payload for this opcode, or 0 for unknown opcodes.
func (o Opcode) ExtHeaderLen() int {
	n := 0
	for _, h := range extHeaders {
		if o.has(h.flag) {
			n += h.len
		}
	}
	return n
}

// decodeExt reads the extension headers op calls for from the start of b
// into p and returns their length. b holds them all (ExtHeaderLen), so
// the decoders cannot fail.
func (p *Packet) decodeExt(op Opcode, b []byte) int {
	off := 0
	for _, h := range extHeaders {
		if !op.has(h.flag) {
			continue
		}
		w := b[off:]
		switch h.flag {
		case fDETH:
			_ = p.DETH.Decode(w)
		case fRETH:
			_ = p.RETH.Decode(w)
		case fAtomicETH:
			_ = p.Atomic.Decode(w)
		case fAETH:
			_ = p.AETH.Decode(w)
		case fAtomicAckETH:
			_ = p.AtomicAck.Decode(w)
		case fImm:
			p.Imm = binary.BigEndian.Uint32(w)
		case fIETH:
			p.IETH = binary.BigEndian.Uint32(w)
		}
		off += h.len
	}
	return off
}

// encodeExt writes the extension headers op calls for from p to the start
// of b and returns their length.
func (p *Packet) encodeExt(op Opcode, b []byte) int {
	off := 0
	for _, h := range extHeaders {
		if op.has(h.flag) {
			p.encodeOne(h.flag, b[off:])
			off += h.len
		}
	}
	return off
}

// encodeOne writes the extension header flag names.
func (p *Packet) encodeOne(flag opFlags, w []byte) {
	switch flag {
	case fDETH:
		p.DETH.Encode(w)
	case fRETH:
		p.RETH.Encode(w)
	case fAtomicETH:
		p.Atomic.Encode(w)
	case fAETH:
		p.AETH.Encode(w)
	case fAtomicAckETH:
		p.AtomicAck.Encode(w)
	case fImm:
		binary.BigEndian.PutUint32(w, p.Imm)
	case fIETH:
		binary.BigEndian.PutUint32(w, p.IETH)
	}
}
