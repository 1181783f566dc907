package trafficgen

import "math/bits"

// rng is SplitMix64. The generator owns its PRNG, rather than using
// math/rand, so that a seed yields the same bytes on every Go release and the
// committed sample capture never drifts.
type rng struct{ state uint64 }

func newRNG(seed int64) *rng { return &rng{state: uint64(seed)} }

func (r *rng) uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) uint32() uint32 { return uint32(r.uint64() >> 32) }

// intn returns a value in [0, n) by multiply-shift; the bias for the small n
// used here is far below anything a test could observe.
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.uint64(), uint64(n))
	return int(hi)
}

// between returns a value in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// chance returns true with probability p.
func (r *rng) chance(p float64) bool {
	return float64(r.uint64()>>11)/(1<<53) < p
}

// pick returns one element of xs.
func pick[T any](r *rng, xs ...T) T { return xs[r.intn(len(xs))] }

// fill fills b with pseudo-random bytes.
func (r *rng) fill(b []byte) {
	for len(b) >= 8 {
		v := r.uint64()
		for i := range 8 {
			b[i] = byte(v >> (8 * i))
		}
		b = b[8:]
	}
	if len(b) > 0 {
		v := r.uint64()
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
	}
}
