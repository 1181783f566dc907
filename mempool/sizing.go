package mempool

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTooSmall is returned when a pool cannot hold every mbuf the data path
// may keep at once.
var ErrTooSmall = errors.New("mempool: too few mbufs")

// Demand lists everything that may hold mbufs at the same time.
type Demand struct {
	RxDescriptors int // rx queues × descriptors per queue
	TxDescriptors int // tx queues × descriptors per queue
	RingSlots     int // sum of service ring capacities
	Lcores        int // lcores that allocate or free mbufs
	CacheSize     int // per-lcore mempool cache
	InFlight      int // bursts in hand: pollers × burst size
	Headroom      int // spare for consumers holding packets
}

// Need returns the number of mbufs the demand requires. A per-lcore cache
// can hold up to 1.5× its size (DPDK flushes above that).
func (d Demand) Need() int {
	return d.RxDescriptors + d.TxDescriptors + d.RingSlots + d.Lcores*d.CacheSize*3/2 + d.InFlight + d.Headroom
}

func (d Demand) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rx descriptors %d + tx descriptors %d + ring slots %d + caches %d×%d×1.5 + in flight %d + headroom %d = %d",
		d.RxDescriptors, d.TxDescriptors, d.RingSlots, d.Lcores, d.CacheSize, d.InFlight, d.Headroom, d.Need())
	return b.String()
}

// Size returns the pool size to create: want when it covers the demand,
// or the demand rounded up to 2^k-1 (the size DPDK's ring-backed pools
// use best) when want is zero.
func Size(want int, d Demand) (int, error) {
	need := d.Need()
	if want == 0 {
		n := 1
		for n-1 < need {
			n <<= 1
		}
		return n - 1, nil
	}
	if want < need {
		return 0, fmt.Errorf("%w: %d configured, %d needed (%s)", ErrTooSmall, want, need, d)
	}
	return want, nil
}

// ErrLeak is returned by Pool.Close when mbufs did not come back.
var ErrLeak = errors.New("mempool: mbuf leak")
