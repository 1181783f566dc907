package daemon

import (
	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// kinds is the data path's half of the consumer kinds, by name: what
// drains a service's lanes. The configuration's half (config.Kind: owned
// or local, TX queue, checks) is listed in internal/config/kinds.go,
// which cannot import the consumers built here. Each kind is one type in
// a file of its own (kind_count.go, kind_forward.go, kind_roce.go,
// kind_kernel.go, kind_process.go); a new kind adds its file and one
// line here, and TestEveryKindBuilds fails while a kind config lists
// has none.
var kinds = map[string]kind{
	config.ConsumerCount:   countKind{},
	config.ConsumerForward: forwardKind{},
	config.ConsumerRoCE:    roceKind{},
	config.ConsumerKernel:  kernelKind{},
	config.ConsumerProcess: processKind{},
}

// kind builds a consumer kind's side of the data path.
type kind interface {
	// drain builds what drains lanes, service s's: all of them when one
	// poll loop owns s, one when s is local, whose consumer transmits
	// on txq.
	drain(d *Daemon, cfg *config.Config, s config.Service, lanes *dispatch.RingSet, txq int) (drainer, error)
	// task is what the poll loop that owns services of the kind runs
	// once for all of them (the kernel exception path), or nil.
	task(d *Daemon) dispatch.Consumer
}

// drainer is what a kind built to drain a service's lanes.
type drainer struct {
	// consumer is polled by the loop; nil when a task drains the
	// service (kernel services).
	consumer dispatch.Consumer
	// counts are the consumer's counters; nil until the task sets them.
	counts *consumer.Counts
	// proc is the daemon's side of a service process.
	proc *consumer.Process
}

// noTask is embedded by the kinds whose consumers are their services'
// own.
type noTask struct{}

func (noTask) task(*Daemon) dispatch.Consumer { return nil }

// kindOf returns the data path's side of service s's kind; Validate has
// refused a configuration with an unknown one.
func kindOf(s config.Service) kind { return kinds[s.Consumer.Type] }
