package roce

// Scatter-gather lists: a work request's SGEs resolved to registered
// memory, and the copies between them and packet payloads.

import "fmt"

// gather returns n bytes at offset off of the WQE's memory, copying only
// when they span SGEs.
func (qp *QP) gather(sg [][]byte, off, n int) []byte {
	if n == 0 {
		return nil
	}
	for i, b := range sg {
		if off >= len(b) {
			off -= len(b)
			continue
		}
		if off+n <= len(b) {
			return b[off : off+n]
		}
		dst := qp.ep.gatherBuf[:n]
		k := copy(dst, b[off:])
		for _, b := range sg[i+1:] {
			if k == n {
				break
			}
			k += copy(dst[k:], b)
		}
		return dst
	}
	return nil
}

// scatter copies data into the memory sg describes, from offset off; it
// reports false, copying nothing, when the data does not fit.
func scatter(sg [][]byte, off int, data []byte) bool {
	total := 0
	for _, b := range sg {
		total += len(b)
	}
	if off < 0 || len(data) > total-off {
		return false
	}
	for _, b := range sg {
		if len(data) == 0 {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(b[off:], data)
		data = data[k:]
		off = 0
	}
	return true
}

// resolve turns SGEs into slices of registered memory, appending them to
// dst (which has the capacity), and returns the total length.
func (qp *QP) resolve(dst [][]byte, sgl []SGE, need Access) (int, error) {
	return resolveSGL(qp.pd, dst, sgl, need)
}

// resolveSGL is resolve against pd, for an SRQ, which has no QP.
func resolveSGL(pd *PD, dst [][]byte, sgl []SGE, need Access) (int, error) {
	total := 0
	for i := range sgl {
		s := &sgl[i]
		b, ok := pd.span(s.LKey, s.Addr, uint64(s.Length), need)
		if !ok {
			return 0, fmt.Errorf("sge %d (lkey %#x addr %#x len %d): %w", i, s.LKey, s.Addr, s.Length, ErrLocalProtection)
		}
		dst = append(dst, b)
		total += len(b)
	}
	if total > MaxMessage {
		return 0, fmt.Errorf("message of %d bytes: %w", total, ErrInvalidArgument)
	}
	return total, nil
}
