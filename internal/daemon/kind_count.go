package daemon

import (
	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// countKind counts and frees what arrives: a consumer.Sink.
type countKind struct{ noTask }

func (countKind) drain(d *Daemon, cfg *config.Config, _ config.Service, lanes *dispatch.RingSet, _ int) (drainer, error) {
	k, err := consumer.NewSink(lanes, cfg.Burst)
	if err != nil {
		return drainer{}, err
	}
	return drainer{consumer: k, counts: &k.Counts}, nil
}
