package daemon

import (
	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// forwardKind transmits what arrives out the port, on txq: a
// consumer.Forwarder.
type forwardKind struct{ noTask }

func (forwardKind) drain(d *Daemon, cfg *config.Config, _ config.Service, lanes *dispatch.RingSet, txq int) (drainer, error) {
	f, err := consumer.NewForwarder(lanes, d.port.ID(), uint16(txq), cfg.Burst)
	if err != nil {
		return drainer{}, err
	}
	return drainer{consumer: f, counts: &f.Counts}, nil
}
