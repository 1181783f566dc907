package config

import (
	"fmt"
	"strings"
)

// Consumer kinds. What drains a service's lanes is its consumer's kind
// (consumer.type). Each kind is one type in a file of its own
// (kind_count.go, kind_forward.go, kind_roce.go, kind_kernel.go,
// kind_process.go) and is listed once, in kinds below: the rest of the
// package asks a service's Kind instead of switching on its type.
//
// A kind has two halves because of the import layers: what the
// configuration must know of it (Kind: is it owned by one poll loop,
// which TX queue it uses, what it checks of its service, what mbufs it
// holds) lives here, at the bottom; what the data path builds for it
// lives with the daemon (internal/daemon/kinds.go), which imports the
// consumers this package must not. A new kind adds its type here and its
// builder there, one line to each list; the daemon's tests fail while
// a kind listed here has no builder.
const (
	ConsumerCount   = "count"   // count and free
	ConsumerForward = "forward" // transmit out the port
	ConsumerRoCE    = "roce"    // the userspace RoCEv2 endpoint (see RoCE)
	ConsumerKernel  = "kernel"  // the kernel exception-path interface (see Kernel)
	ConsumerProcess = "process" // a service process attached as a DPDK secondary (see process.go)
)

// kinds lists every consumer kind, in the order error messages name them.
var kinds = [...]Kind{countKind{}, forwardKind{}, roceKind{}, kernelKind{}, processKind{}}

// Kind is what the configuration knows of a consumer kind.
type Kind interface {
	// Traits are the kind's name and what it requires of its services.
	Traits() Traits
	// TxQueue returns the port TX queue the consumer of service s
	// transmits on (lane 0's, if local), if it transmits.
	TxQueue(c *Config, s Service) (int, bool)
	// Mbufs is what a consumer of the kind holds on top of its lanes
	// and one burst, for sizing the mbuf pool.
	Mbufs(c *Config) int
	// check reports the kind's problems with service i.
	check(v *validation, i int)
}

// Traits are a kind's name and what it requires of its services.
type Traits struct {
	// Name is the consumer.type that selects the kind.
	Name string
	// Owned: one consumer, run by the poll loop that lists the service
	// in pollers[].services, must drain all the service's lanes. A
	// service of another kind that no poller lists is local: a consumer
	// per lane, on the loop that fills it (see lanes.go).
	Owned bool
	// Fixed: a service of the kind lives as long as the daemon; a
	// reload may not add, remove or change it (CheckReload).
	Fixed bool
}

// Kinds returns every consumer kind.
func Kinds() []Kind { return kinds[:] }

// KindOf returns the kind named by consumer.type, or nil if there is none.
func KindOf(name string) Kind {
	for _, k := range kinds {
		if k.Traits().Name == name {
			return k
		}
	}
	return nil
}

// Kind returns the kind of service s's consumer, nil if consumer.type
// names none (which Validate reports).
func (s Service) Kind() Kind { return KindOf(s.Consumer.Type) }

// owned reports whether service s must be drained by one poll loop.
func (s Service) owned() bool {
	k := s.Kind()
	return k != nil && k.Traits().Owned
}

// kindNames lists the kinds' names for an error message: "a", "b" or "c".
func kindNames() string {
	var b strings.Builder
	for i, k := range kinds {
		switch {
		case i == len(kinds)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", k.Traits().Name)
	}
	return b.String()
}

// noTx is embedded by the kinds that transmit nothing.
type noTx struct{}

func (noTx) TxQueue(*Config, Service) (int, bool) { return 0, false }

// ownTx is embedded by the kinds that transmit on consumer.tx_queue.
type ownTx struct{}

func (ownTx) TxQueue(_ *Config, s Service) (int, bool) { return s.Consumer.TxQueue, true }

// checkTxQueue reports a consumer.tx_queue the port does not have.
func (v *validation) checkTxQueue(i int) {
	s := v.c.Services[i]
	if s.Consumer.TxQueue < 0 || s.Consumer.TxQueue >= v.c.Port.TxQueues {
		v.bad(servicePath(i, "consumer.tx_queue"), "tx queue %d does not exist: the port has %d", s.Consumer.TxQueue, v.c.Port.TxQueues)
	}
}

// servicePath is the dotted path of a field of services[i].
func servicePath(i int, field string) string {
	return fmt.Sprintf("services[%d].%s", i, field)
}
