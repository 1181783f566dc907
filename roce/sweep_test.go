package roce

import (
	"math/rand/v2"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// sweepConfig is roctest.SweepConfig with the endpoint settings as an
// EndpointConfig.
func sweepConfig(seed uint64) (memlink.Config, EndpointConfig) {
	lc, w := roctest.SweepConfig(seed)
	return lc, EndpointConfig{TxBurst: w.TxBurst, RxBurst: w.RxBurst, AckReqEvery: w.AckReqEvery, MaxUnackedPSNs: w.MaxUnackedPSNs}
}

// TestSweepOperations runs the mixed-operation soak over many seeded
// configurations (it found READ accounting bugs that single runs missed).
func TestSweepOperations(t *testing.T) {
	roctest.SweepSeeds(t, 120, 20, func(t *testing.T, seed uint64) {
		lc, ec := sweepConfig(seed)
		n := newTestNet(t, lc, ec)
		const nops = 60
		o := defaultQPOpts()
		o.mtu = []int{256, 1024, 4096}[(seed/2)%3]
		o.sendDepth, o.recvDept = 16, nops
		o.rdAtomic = 1 + int(seed%4)
		o.psnA = uint32(0xFFFFFF - seed)
		p := n.newPair(o)
		n.soak(t, p, nops, rand.New(rand.NewPCG(seed, 6)), 1_000_000)
	})
}
