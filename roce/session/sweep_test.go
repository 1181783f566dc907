package session

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// sweepConfig is roctest.SweepConfig with the endpoint settings as an
// roce.EndpointConfig.
func sweepConfig(seed uint64) (memlink.Config, roce.EndpointConfig) {
	lc, w := roctest.SweepConfig(seed)
	return lc, roce.EndpointConfig{TxBurst: w.TxBurst, RxBurst: w.RxBurst, AckReqEvery: w.AckReqEvery, MaxUnackedPSNs: w.MaxUnackedPSNs}
}

// TestSweepSessions streams through sessions of many seeded shapes: tiny
// and large buffers, one or many of them, send and read chunks of odd
// sizes, up to 10% of each fault.
func TestSweepSessions(t *testing.T) {
	roctest.SweepSeeds(t, 80, 16, func(t *testing.T, seed uint64) {
		lc, ec := sweepConfig(seed)
		cfg := DefaultConfig()
		cfg.BufferSize = []int{100, 4096, 16 << 10, 128 << 10}[(seed/2)%4]
		cfg.SendBuffers = []int{1, 3, 32}[(seed/7)%3]
		cfg.RecvBuffers = []int{1, 4, 32}[(seed/11)%3]
		cfg.PathMTU = []int{256, 1024, 4096}[(seed/13)%3]
		cfg.Timeout = 10
		cfg.MinRNRTimer = uint8(seed % 32)
		sp := newSessionPair(t, lc, ec, cfg)
		size := 200_000 + int(seed)*1000
		res := sp.stream(t, size, seed, 1+int(seed*7919)%200_000, 1+int(seed*104729)%100_000)
		if res.received != size || res.sendHash != res.recvHash {
			t.Fatalf("received %d of %d bytes", res.received, size)
		}
	})
}
