// Package cmtest is the roctest network that the tests of the packages
// above roce/cm share: a server endpoint on side A and a client endpoint
// on side B, each with a connection manager unless the test wants bare
// endpoints.
package cmtest

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// Config describes a network.
type Config struct {
	Link memlink.Config
	// Srv and Cli configure the endpoints; New sets their MACs and link
	// ends, and their IPs unless they name one (which then becomes the
	// side's).
	Srv, Cli roce.EndpointConfig
	// CM, if not nil, configures the server's connection manager; the
	// client's is seeded with CM.Seed+1.
	CM *cm.Config
}

// Net is a server and a client on a roctest network. Each round polls
// the server's endpoint, its Manager, the client's, its Manager, then
// what the test adds, as internal/roced's Node does.
type Net struct {
	*roctest.Net
	Srv, Cli   *roce.Endpoint
	SrvM, CliM *cm.Manager // nil without Config.CM
}

// New returns the network cfg describes.
func New(tb testing.TB, cfg Config) *Net {
	tb.Helper()
	n := &Net{Net: roctest.New(tb, cfg.Link)}
	if cfg.Srv.IP.IsValid() {
		n.A.IP = cfg.Srv.IP
	}
	if cfg.Cli.IP.IsValid() {
		n.B.IP = cfg.Cli.IP
	}
	n.Srv, n.Cli = roctest.Pair(n.Net, func(s roctest.Side) (*roce.Endpoint, error) {
		c := cfg.Srv
		if s.Index == 1 {
			c = cfg.Cli
		}
		c.MAC, c.IP, c.IO = s.MAC, s.IP, s.Link
		return roce.NewEndpoint(c)
	})
	if cfg.CM == nil {
		n.Add(n.Srv, n.Cli)
		return n
	}
	n.SrvM, n.CliM = roctest.Pair(n.Net, func(s roctest.Side) (*cm.Manager, error) {
		c := *cfg.CM
		c.Seed += uint64(s.Index)
		return cm.New([]*roce.Endpoint{n.Srv, n.Cli}[s.Index], c)
	})
	n.Add(n.Srv, n.SrvM, n.Cli, n.CliM)
	return n
}
