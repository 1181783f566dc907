package session

import (
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// BenchmarkSession measures session throughput between two endpoints over
// the in-memory link (clean), per message size and buffer size.
func BenchmarkSession(b *testing.B) {
	for _, bc := range []struct{ msg, buf, mtu int }{
		{64 << 10, 128 << 10, 1024},
		{4 << 10, 128 << 10, 1024},
		{64 << 10, 128 << 10, 4096},
		{4 << 10, 128 << 10, 4096},
		{128 << 10, 128 << 10, 4096},
	} {
		b.Run(fmt.Sprintf("msg=%dKiB/buf=%dKiB/mtu=%d", bc.msg>>10, bc.buf>>10, bc.mtu), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.BufferSize, cfg.PathMTU, cfg.Timeout = bc.buf, bc.mtu, 14
			sp := newSessionPair(b, roctest.Faulty(1, 0), roce.EndpointConfig{}, cfg)
			msg := make([]byte, bc.msg)
			rbuf := make([]byte, bc.msg)
			sp.pump(b, msg, rbuf)
			b.SetBytes(int64(bc.msg))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				sp.pump(b, msg, rbuf)
			}
		})
	}
}
