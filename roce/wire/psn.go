package wire

import "time"

// PSNMask keeps the 24 bits of a packet sequence number (also the width
// of QP numbers and MSNs).
const PSNMask = 0xFFFFFF

// PSNAdd returns psn+n modulo 2^24; n may be negative.
func PSNAdd(psn uint32, n int) uint32 {
	return uint32(int64(psn)+int64(n)) & PSNMask
}

// PSNCompare orders two PSNs in the 24-bit circular space with a
// half-space window, as rxe's psn_compare: it returns -1 if a is before
// b, 0 if equal and +1 if a is after b.
func PSNCompare(a, b uint32) int {
	d := int32((a - b) << 8)
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// PSNDiff returns the signed distance a-b in the 24-bit circular space,
// in [-2^23, 2^23).
func PSNDiff(a, b uint32) int {
	return int(int32((a-b)<<8) >> 8)
}

// rnrDelayMicros maps an RNR timer code to its delay (IBA table; Linux
// ib_verbs.h enum ib_rnr_timeout). Code 0 is the longest, 655.36 ms.
var rnrDelayMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// RNRDelay returns how long a requester waits after an RNR NAK carrying
// timer code code. Only the low 5 bits of code are used.
func RNRDelay(code uint8) time.Duration {
	return time.Duration(rnrDelayMicros[code&0x1F]) * time.Microsecond
}

// MTUFromEnum converts an IBA path MTU enum (1..5) to bytes (256..4096).
func MTUFromEnum(e uint8) (int, bool) {
	if e < 1 || e > 5 {
		return 0, false
	}
	return 128 << e, true
}

// MaxMTU is the largest path MTU (IBA enum 5).
const MaxMTU = 4096

// MTUEnum converts a path MTU in bytes (exactly 256, 512, 1024, 2048 or
// 4096) to its IBA enum.
func MTUEnum(mtu int) (uint8, bool) {
	for e := uint8(1); e <= 5; e++ {
		if 128<<e == mtu {
			return e, true
		}
	}
	return 0, false
}
