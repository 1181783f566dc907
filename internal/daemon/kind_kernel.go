package daemon

import (
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// kernelKind hands what arrives to the kernel interface. Its services
// have no consumer of their own: the exception path (kernelPath), a task
// of the poll loop that owns them, drains them all in priority order and
// sets their counts (newKernelConsumer).
type kernelKind struct{}

func (kernelKind) drain(*Daemon, *config.Config, config.Service, *dispatch.RingSet, int) (drainer, error) {
	return drainer{}, nil
}

func (kernelKind) task(d *Daemon) dispatch.Consumer {
	if d.kernel == nil {
		return nil
	}
	return d.kernel.consumer
}
