package roce

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// TestNoAllocsPerMessage: once warm, moving messages between two QPs,
// including go-back-N and duplicate handling on a faulty link, allocates
// nothing. (roce/session checks the same through sessions.)
func TestNoAllocsPerMessage(t *testing.T) {
	roctest.CleanAndFaulty(t, func(t *testing.T, lc memlink.Config) {
		const size = 200_000
		n := newTestNet(t, lc, EndpointConfig{})
		p := n.newPair(defaultQPOpts())
		src := roctest.Region(t, n.pa, size, 0)
		dst := roctest.Region(t, n.pb, size, AccessLocalWrite)
		swr := SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, size)}}
		rwr := RecvWR{ID: 2, SGList: []SGE{dst.SGE(0, size)}}
		var wc [4]WorkCompletion
		round := func() {
			if err := p.b.PostRecv(&rwr); err != nil {
				t.Fatal(err)
			}
			if err := p.a.PostSend(&swr); err != nil {
				t.Fatal(err)
			}
			sent, got := 0, 0
			for i := 0; sent == 0 || got == 0; i++ {
				if i > 1_000_000 {
					t.Fatalf("message stuck: %d sent, %d received", sent, got)
				}
				if n.Poll() == 0 {
					n.Advance()
				}
				n.Now = n.Now.Add(1000)
				sent += p.acqs[0].Poll(wc[:])
				got += p.bcqs[1].Poll(wc[:])
			}
			if wc[0].Status != WCSuccess {
				t.Fatalf("completion %+v", wc[0])
			}
		}
		for range 20 {
			round()
		}
		if a := testing.AllocsPerRun(50, round); a != 0 {
			t.Errorf("%v allocations per 200 kB message", a)
		}
	})
}
