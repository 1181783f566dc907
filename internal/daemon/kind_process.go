package daemon

import (
	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/service"
)

// processKind leaves the service to a service process, which drains the
// lanes; the loop that owns the service serves the process's other
// rings (consumer.Process) and transmits what it sends on txq.
type processKind struct{ noTask }

func (processKind) drain(d *Daemon, cfg *config.Config, s config.Service, lanes *dispatch.RingSet, txq int) (drainer, error) {
	ring := func(i int) string { return cfg.ProcessRingName(s.Name, config.ProcessRings[i]) }
	proc, err := consumer.NewProcess(consumer.ProcessConfig{
		Service: s.Name, Lanes: lanes, TxRing: ring(0), RetRing: ring(1), BufRing: ring(2),
		RingSize: cfg.ProcessRingSize(),
		Pool:     d.pool, Port: d.port.ID(), Queue: uint16(txq), Burst: cfg.Burst,
	})
	if err != nil {
		return drainer{}, err
	}
	d.log.Info("service left to a process", "service", s.Name, "control", service.ControlName(s.Name), "lanes", cfg.Lanes())
	return drainer{consumer: proc, counts: &proc.Counts, proc: proc}, nil
}
