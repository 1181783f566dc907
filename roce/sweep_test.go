package roce

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
)

// sweepConfig derives a link, endpoint and QP configuration from seed,
// covering small and large MTUs, windows, bursts, queues and fault rates.
func sweepConfig(seed uint64) (memlink.Config, EndpointConfig) {
	f := []float64{0, 0.01, 0.05, 0.1}[seed%4]
	lc := memlink.Config{Seed: seed, Loss: f, Reorder: f, Duplicate: f, Corrupt: f, QueueLen: []int{16, 64, 1024}[seed%3]}
	ec := EndpointConfig{
		TxBurst:        []int{1, 7, 32}[(seed/3)%3],
		RxBurst:        []int{1, 5, 32}[(seed/5)%3],
		AckReqEvery:    []int{1, 5, 64}[(seed/9)%3],
		MaxUnackedPSNs: []int{4, 32, 128}[(seed/27)%3],
	}
	return lc, ec
}

// TestSweepOperations runs the mixed-operation soak over many seeded
// configurations (it found READ accounting bugs that single runs missed).
func TestSweepOperations(t *testing.T) {
	seeds := uint64(120)
	if testing.Short() {
		seeds = 20
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			lc, ec := sweepConfig(seed)
			n := newTestNet(t, lc, ec)
			const nops = 60
			o := defaultQPOpts()
			o.mtu = []int{256, 1024, 4096}[(seed/2)%3]
			o.sendDepth, o.recvDept = 16, nops
			o.rdAtomic = 1 + int(seed%4)
			o.psnA = uint32(0xFFFFFF - seed)
			p := n.newPair(o)
			rng := rand.New(rand.NewPCG(seed, 6))
			ab := newSoakSide(t, p.a, p.b, n.pa, n.pb, p.acqs[0], p.bcqs[1], nops, rng)
			ba := newSoakSide(t, p.b, p.a, n.pb, n.pa, p.bcqs[0], p.acqs[1], nops, rng)
			n.Run(1_000_000, func() bool {
				for _, s := range []*soakSide{ab, ba} {
					s.post(t)
					s.check(t)
				}
				return ab.done() && ba.done()
			})
		})
	}
}
