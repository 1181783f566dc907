package config

import "fmt"

// Lanes: every poll loop that receives (has rx_queues) feeds each service
// through a ring of its own, the service's lane for that loop, so that no
// ring has two producers. A service's consumer then runs in one of two
// ways:
//
//   - local: a count or forward service that no poller lists runs on every
//     receiving loop, one consumer per lane, on the packets that loop
//     received. A local forwarder on lane k transmits on TX queue
//     consumer.tx_queue + k.
//   - owned: a service listed in pollers[].services (kernel and roce
//     services must be) runs one consumer on that loop, which drains all
//     the service's lanes.

// Lanes returns how many lanes each service has: the number of poll loops
// with RX queues (at least 1).
func (c *Config) Lanes() int {
	n := 0
	for _, pl := range c.Pollers {
		if len(pl.RxQueues) > 0 {
			n++
		}
	}
	return max(n, 1)
}

// Lane returns the lane pollers[i] feeds, or -1 if it receives nothing.
func (c *Config) Lane(i int) int {
	if len(c.Pollers[i].RxQueues) == 0 {
		return -1
	}
	lane := 0
	for _, pl := range c.Pollers[:i] {
		if len(pl.RxQueues) > 0 {
			lane++
		}
	}
	return lane
}

// Owner returns the index of the poller that lists the named service, or
// -1 if none does.
func (c *Config) Owner(service string) int {
	for i, pl := range c.Pollers {
		for _, name := range pl.Services {
			if name == service {
				return i
			}
		}
	}
	return -1
}

// IsLocal reports whether service i runs its consumer on every receiving
// loop: a count or forward service that no poller lists.
func (c *Config) IsLocal(i int) bool {
	s := c.Services[i]
	k := s.Kind()
	return k != nil && !k.Traits().Owned && c.Owner(s.Name) < 0
}

// LocalTxQueue is the TX queue a local forwarder transmits on from lane.
func LocalTxQueue(s Service, lane int) int { return s.Consumer.TxQueue + lane }

// validateLocalTxQueues checks the TX queues of local forwarders: each
// must exist and belong to no other loop. txOwner maps the queues that
// owned consumers (forwarders, the RoCE endpoint, the kernel path) use to
// their pollers.
func (c *Config) validateLocalTxQueues(txOwner map[int]int, bad func(string, string, ...any)) {
	for i, s := range c.Services {
		if _, tx := c.txQueueOf(s); !tx || !c.IsLocal(i) {
			continue // local services are count or forward ones
		}
		path := fmt.Sprintf("services[%d].consumer.tx_queue", i)
		for pi := range c.Pollers {
			lane := c.Lane(pi)
			if lane < 0 {
				continue
			}
			q := LocalTxQueue(s, lane)
			if q >= c.Port.TxQueues {
				bad(path, "tx queue %d does not exist: service %q forwards on every receiving poll loop, lane k on tx_queue + k, and pollers[%d] is lane %d; the port has %d tx queues",
					q, s.Name, pi, lane, c.Port.TxQueues)
				break
			}
			if o, used := txOwner[q]; used && o != pi {
				bad(path, "service %q forwards from pollers[%d] (lane %d) on tx queue %d, which pollers[%d] uses; tx queues are not shared between lcores",
					s.Name, pi, lane, q, o)
				break
			}
			txOwner[q] = pi
		}
	}
}
