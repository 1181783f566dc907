package wire

// CephQPRecordLen is the size of the Ceph async+rdma QP exchange message:
// "%04x:%08x:%08x:%08x:%s" of lid, qpn, psn, peer_qpn and 32 hex digits
// of the GID, plus the terminating NUL. Ceph's receiver insists on
// exactly this many bytes in one read.
const CephQPRecordLen = 65

// CephQPRecord is the QP description Ceph's async+rdma messenger sends
// over its TCP side channel.
type CephQPRecord struct {
	LID     uint16
	QPN     uint32
	PSN     uint32
	PeerQPN uint32 // 0 in the client's first message
	GID     [16]byte
}

// Decode parses the first CephQPRecordLen bytes of p. Hex digits of
// either case are accepted; the layout (field widths, colons, NUL) must
// be exact. Errors wrap ErrTruncated or ErrBadRecord.
func (r *CephQPRecord) Decode(p []byte) error {
	if len(p) < CephQPRecordLen {
		return errShortCeph
	}
	p = p[:CephQPRecordLen]
	if p[4] != ':' || p[13] != ':' || p[22] != ':' || p[31] != ':' || p[64] != 0 {
		return errCephLayout
	}
	lid, ok1 := parseHex(p[0:4])
	qpn, ok2 := parseHex(p[5:13])
	psn, ok3 := parseHex(p[14:22])
	peer, ok4 := parseHex(p[23:31])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return errCephHex
	}
	var gid [16]byte
	for i := range gid {
		v, ok := parseHex(p[32+2*i : 34+2*i])
		if !ok {
			return errCephHex
		}
		gid[i] = byte(v)
	}
	r.LID = uint16(lid)
	r.QPN, r.PSN, r.PeerQPN = qpn, psn, peer
	r.GID = gid
	return nil
}

// Encode formats r into p[:CephQPRecordLen] with lowercase hex, as
// Ceph's sprintf does. It fails with ErrShortBuffer if p is too small.
func (r *CephQPRecord) Encode(p []byte) error {
	if len(p) < CephQPRecordLen {
		return ErrShortBuffer
	}
	p = p[:CephQPRecordLen]
	putHex(p[0:4], uint32(r.LID))
	p[4] = ':'
	putHex(p[5:13], r.QPN)
	p[13] = ':'
	putHex(p[14:22], r.PSN)
	p[22] = ':'
	putHex(p[23:31], r.PeerQPN)
	p[31] = ':'
	for i, b := range r.GID {
		putHex(p[32+2*i:34+2*i], uint32(b))
	}
	p[64] = 0
	return nil
}

func parseHex(p []byte) (uint32, bool) {
	var v uint32
	for _, c := range p {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(d)
	}
	return v, true
}

// putHex writes v as len(p) lowercase hex digits, most significant first.
func putHex(p []byte, v uint32) {
	const digits = "0123456789abcdef"
	for i := len(p) - 1; i >= 0; i-- {
		p[i] = digits[v&0xF]
		v >>= 4
	}
}
