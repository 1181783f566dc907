package metrics

import (
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

// rocePair is a RoCE server and client over an in-memory link: endpoints,
// connection managers, and an echo service on the server's port 7471.
type rocePair struct {
	srv, cli   *roce.Endpoint
	srvM, cliM *cm.Manager
	echo       *app.RawEcho
	now        time.Time
	pollers    []func(time.Time) int
}

func newRocePair(t *testing.T, lc memlink.Config) *rocePair {
	t.Helper()
	ls, lcl := memlink.New(lc)
	p := &rocePair{now: time.Unix(1000, 0)}
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
	if p.echo, err = app.NewRawEcho(p.srv, app.RawConfig{MessageSize: 4096}); err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(p.srvM, 7471, p.echo); err != nil {
		t.Fatal(err)
	}
	p.pollers = append(p.pollers, p.echo.Poll)
	return p
}

// run polls both sides, 10 µs of virtual time a round, until done.
func (p *rocePair) run(t *testing.T, done func() bool) {
	t.Helper()
	for range 2_000_000 {
		p.srvM.Poll(p.now)
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

// ping starts an echo roce-ping from the client; done receives its result.
func (p *rocePair) ping(t *testing.T, count int) <-chan ping.Result {
	t.Helper()
	done := make(chan ping.Result, 1)
	p.cliM.Poll(p.now)
	c, err := ping.Start(p.cliM, ipSrv, 7471, ping.Config{Count: count, Size: 4096, Mode: ping.ModeEcho}, p.now,
		func(r ping.Result) { done <- r })
	if err != nil {
		t.Fatal(err)
	}
	p.pollers = append(p.pollers, c.Poll)
	return done
}
