package metrics

import (
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest/cmtest"
)

// The server is side A of the network, the client side B.
var macSrv, macCli, ipSrv, ipCli = roctest.MACA, roctest.MACB, roctest.IPA, roctest.IPB

// rocePair is a RoCE server and client over an in-memory link: endpoints,
// connection managers, and an echo service on the server's port 7471.
type rocePair struct {
	*cmtest.Net
	echo *app.RawEcho
}

func newRocePair(t *testing.T, lc memlink.Config) *rocePair {
	t.Helper()
	p := &rocePair{Net: cmtest.New(t, cmtest.Config{Link: lc,
		CM: &cm.Config{Seed: 1, RetransmitTimeout: 50 * time.Millisecond, MaxRetries: 4, TimeWait: 20 * time.Millisecond}})}
	var err error
	if p.echo, err = app.NewRawEcho(p.Srv, app.RawConfig{MessageSize: 4096}); err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(p.SrvM, 7471, p.echo); err != nil {
		t.Fatal(err)
	}
	p.AddFunc(p.echo.Poll)
	return p
}

// run polls both sides, 10 µs of virtual time a round, until done.
func (p *rocePair) run(done func() bool) { p.Step(10*time.Microsecond, 2_000_000, done) }

// ping starts an echo roce-ping from the client; done receives its result.
func (p *rocePair) ping(t *testing.T, count int) <-chan ping.Result {
	t.Helper()
	done := make(chan ping.Result, 1)
	p.Cli.Poll(p.Now)
	p.CliM.Poll(p.Now)
	c, err := ping.Start(p.CliM, ipSrv, 7471, ping.Config{Count: count, Size: 4096, Mode: ping.ModeEcho}, p.Now,
		func(r ping.Result) { done <- r })
	if err != nil {
		t.Fatal(err)
	}
	p.AddFunc(c.Poll)
	return done
}
