package roce

// udpSourcePort returns the UDP source port rxe uses for a QP:
// 0xC000 | hash_32(qpn, 14), one flow per QP for ECMP entropy (rxe_qp.c
// rxe_qp_init_req; hash_32 multiplies by GOLDEN_RATIO_32 and keeps the
// top bits). Kept here until roce/wire exports its own.
func udpSourcePort(qpn uint32) uint16 {
	const goldenRatio32 = 0x61C88647
	return 0xC000 | uint16((qpn*goldenRatio32)>>(32-14))
}
