package ping_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest/cmtest"
)

var ipSrv = roctest.IPA // the server is side A of the network

type pair struct{ *cmtest.Net }

func newPair(t *testing.T, lc memlink.Config) *pair {
	t.Helper()
	return &pair{cmtest.New(t, cmtest.Config{Link: lc,
		CM: &cm.Config{Seed: 1, RetransmitTimeout: 50 * time.Millisecond, MaxRetries: 4, TimeWait: 20 * time.Millisecond}})}
}

// run polls both sides, 10 µs of virtual time a round, until done.
func (p *pair) run(done func() bool) { p.Step(10*time.Microsecond, 2_000_000, done) }

func runPing(t *testing.T, p *pair, port uint16, cfg ping.Config) ping.Result {
	t.Helper()
	p.Cli.Poll(p.Now)
	p.CliM.Poll(p.Now)
	var res *ping.Result
	c, err := ping.Start(p.CliM, ipSrv, port, cfg, p.Now, func(r ping.Result) { res = &r })
	if err != nil {
		t.Fatal(err)
	}
	p.AddFunc(c.Poll)
	p.run(func() bool { return res != nil })
	// Let the disconnect finish, then nothing may be left behind.
	p.run(func() bool { return p.CliM.NumConns() == 0 && p.Cli.NumQPs() == 0 })
	return *res
}

func TestEchoAgainstRawEcho(t *testing.T) {
	for _, lc := range []memlink.Config{{}, {Seed: 5, Loss: 0.02, Reorder: 0.02}} {
		p := newPair(t, lc)
		echo, err := app.NewRawEcho(p.Srv, app.RawConfig{MessageSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Listen(p.SrvM, 7471, echo); err != nil {
			t.Fatal(err)
		}
		p.AddFunc(echo.Poll)
		alloc := &roce.HeapAllocator{}
		res := runPing(t, p, 7471, ping.Config{Count: 50, Size: 4096, Mode: ping.ModeEcho, Allocator: alloc})
		if res.Err != nil || res.Sent != 50 || res.Received != 50 || len(res.RTTs) != 50 || res.Bytes != 50*4096 {
			t.Fatalf("loss %v: %+v", lc.Loss, res)
		}
		lo, mid, hi := res.RTT()
		t.Logf("loss %v: setup %v, rtt %v/%v/%v, %.1f MB/s (virtual time)", lc.Loss, res.Setup, lo, mid, hi, res.Throughput()/1e6)
		if alloc.InUse() != 0 {
			t.Errorf("%d bytes of client buffers not freed", alloc.InUse())
		}
	}
}

func TestToseAgainstCMATose(t *testing.T) {
	p := newPair(t, memlink.Config{})
	tose, err := app.NewCMATose(p.Srv, app.CMAToseConfig{Count: 10, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(p.SrvM, 7472, tose); err != nil {
		t.Fatal(err)
	}
	p.AddFunc(tose.Poll)
	res := runPing(t, p, 7472, ping.Config{Count: 10, Size: 100, Mode: ping.ModeTose})
	if res.Err != nil || res.Sent != 10 || res.Received != 10 {
		t.Fatalf("%+v", res)
	}
}

func TestRejectedPort(t *testing.T) {
	p := newPair(t, memlink.Config{})
	res := runPing(t, p, 9999, ping.Config{Count: 1, Size: 16})
	if !errors.Is(res.Err, cm.ErrRejected) {
		t.Fatalf("err = %v, want a rejection", res.Err)
	}
}

func TestBadConfig(t *testing.T) {
	p := newPair(t, memlink.Config{})
	if _, err := ping.Start(p.CliM, ipSrv, 1, ping.Config{Count: 0, Size: 16}, p.Now, nil); err == nil {
		t.Error("count 0 accepted")
	}
}
