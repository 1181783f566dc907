package ping_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
)

var (
	macSrv, macCli = [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	ipSrv, ipCli   = netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
)

type pair struct {
	srvM, cliM *cm.Manager
	srv, cli   *roce.Endpoint
	now        time.Time
	pollers    []func(time.Time) int
}

func newPair(t *testing.T, lc memlink.Config) *pair {
	ls, lcl := memlink.New(lc)
	p := &pair{now: time.Unix(1000, 0)}
	var err error
	if p.srv, err = roce.NewEndpoint(roce.EndpointConfig{MAC: macSrv, IP: ipSrv, IO: ls}); err != nil {
		t.Fatal(err)
	}
	if p.cli, err = roce.NewEndpoint(roce.EndpointConfig{MAC: macCli, IP: ipCli, IO: lcl}); err != nil {
		t.Fatal(err)
	}
	cfg := cm.Config{Seed: 1, RetransmitTimeout: 50 * time.Millisecond, MaxRetries: 4, TimeWait: 20 * time.Millisecond}
	if p.srvM, err = cm.New(p.srv, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 2
	if p.cliM, err = cm.New(p.cli, cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

// run polls both sides, 10 µs of virtual time a round, until done.
func (p *pair) run(t *testing.T, done func() bool) {
	t.Helper()
	for i := 0; i < 2_000_000; i++ {
		p.srv.Poll(p.now)
		p.srvM.Poll(p.now)
		p.cli.Poll(p.now)
		p.cliM.Poll(p.now)
		for _, f := range p.pollers {
			f(p.now)
		}
		if done() {
			return
		}
		p.now = p.now.Add(10 * time.Microsecond)
	}
	t.Fatal("did not finish")
}

func runPing(t *testing.T, p *pair, port uint16, cfg ping.Config) ping.Result {
	t.Helper()
	p.cli.Poll(p.now)
	p.cliM.Poll(p.now)
	var res *ping.Result
	c, err := ping.Start(p.cliM, ipSrv, port, cfg, p.now, func(r ping.Result) { res = &r })
	if err != nil {
		t.Fatal(err)
	}
	p.pollers = append(p.pollers, c.Poll)
	p.run(t, func() bool { return res != nil })
	// Let the disconnect finish, then nothing may be left behind.
	p.run(t, func() bool { return p.cliM.NumConns() == 0 && p.cli.NumQPs() == 0 })
	return *res
}

func TestEchoAgainstRawEcho(t *testing.T) {
	for _, lc := range []memlink.Config{{}, {Seed: 5, Loss: 0.02, Reorder: 0.02}} {
		p := newPair(t, lc)
		echo, err := app.NewRawEcho(p.srv, app.RawConfig{MessageSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Listen(p.srvM, 7471, echo); err != nil {
			t.Fatal(err)
		}
		p.pollers = append(p.pollers, echo.Poll)
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
	tose, err := app.NewCMATose(p.srv, app.CMAToseConfig{Count: 10, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(p.srvM, 7472, tose); err != nil {
		t.Fatal(err)
	}
	p.pollers = append(p.pollers, tose.Poll)
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
	if _, err := ping.Start(p.cliM, ipSrv, 1, ping.Config{Count: 0, Size: 16}, p.now, nil); err == nil {
		t.Error("count 0 accepted")
	}
}
