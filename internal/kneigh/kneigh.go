// Package kneigh resolves IPv4 neighbours through the kernel's own table,
// for a RoCE endpoint that shares its address with the kernel (the af_xdp
// port mode). There the XDP program passes ARP to the kernel, so the
// endpoint's own who-has requests are answered to the kernel, never to
// the endpoint: it asks the kernel instead.
//
// A Resolver runs one goroutine, which alone makes netlink calls: the
// poll loop only queues addresses and collects answers, never blocking.
package kneigh

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Poll is how often the resolver reads the kernel's table while an
// address is wanted; the kernel retransmits its own probes each second.
const Poll = 5 * time.Millisecond

// queueLen bounds the requests and the answers in flight. A request that
// finds the queue full is dropped: the neighbour table asks again at its
// next retransmission.
const queueLen = 256

type answer struct {
	ip  netip.Addr
	mac [6]byte
}

// Resolver looks addresses up in the kernel's neighbour table of one
// interface, and has the kernel resolve those it lacks.
type Resolver struct {
	link    int
	req     chan netip.Addr
	ans     chan answer
	cancel  context.CancelFunc
	done    sync.WaitGroup
	mu      sync.Mutex
	lastErr error
}

// Start starts a resolver for the interface named ifname, in the calling
// thread's network namespace. Close stops it.
func Start(ifname string) (*Resolver, error) {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("kneigh: interface %s: %w", ifname, err)
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("kneigh: netlink: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Resolver{link: l.Attrs().Index, req: make(chan netip.Addr, queueLen), ans: make(chan answer, queueLen), cancel: cancel}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		defer h.Close()
		r.run(ctx, h)
	}()
	return r, nil
}

// Request asks for ip's MAC address without blocking; the answer comes
// from Next once the kernel has it. It reports false when the queue is
// full.
func (r *Resolver) Request(ip netip.Addr) bool {
	select {
	case r.req <- ip.Unmap():
		return true
	default:
		return false
	}
}

// Next returns a resolved address and its MAC address without blocking,
// if one is waiting.
func (r *Resolver) Next() (ip netip.Addr, mac [6]byte, ok bool) {
	select {
	case a := <-r.ans:
		return a.ip, a.mac, true
	default:
		return netip.Addr{}, [6]byte{}, false
	}
}

// Err returns the last netlink error the resolver met, if any; it keeps
// running after one.
func (r *Resolver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Close stops the resolver and waits for its goroutine.
func (r *Resolver) Close() {
	r.cancel()
	r.done.Wait()
}

func (r *Resolver) run(ctx context.Context, h *netlink.Handle) {
	// wanted holds the addresses asked for and not yet answered, each
	// until its deadline: the neighbour table gives up on its own clock
	// and asks again if it still wants one. The ticker runs only while
	// one is wanted: an idle node's resolver never wakes.
	wanted := map[netip.Addr]time.Time{}
	tick := time.NewTicker(Poll)
	tick.Stop()
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ip := <-r.req:
			if _, ok := wanted[ip]; !ok {
				// Ask the kernel to resolve it (NTF_USE: as if a packet
				// were sent to it), then look at once: most are known.
				r.note(r.use(h, ip))
			}
			if len(wanted) == 0 {
				tick.Reset(Poll)
			}
			wanted[ip] = time.Now().Add(2 * time.Second)
			r.lookup(h, wanted)
		case now := <-tick.C:
			for ip, until := range wanted {
				if now.After(until) {
					delete(wanted, ip)
				}
			}
			r.lookup(h, wanted)
		}
		if len(wanted) == 0 {
			tick.Stop()
		}
	}
}

// use has the kernel resolve ip: an NTF_USE update of the entry, created
// if missing, sends the kernel's who-has as a packet to ip would.
func (r *Resolver) use(h *netlink.Handle, ip netip.Addr) error {
	err := h.NeighSet(&netlink.Neigh{
		LinkIndex: r.link, Family: unix.AF_INET, IP: net.IP(ip.AsSlice()),
		State: netlink.NUD_NONE, Flags: netlink.NTF_USE,
	})
	if err != nil {
		return fmt.Errorf("kneigh: resolve %v: %w", ip, err)
	}
	return nil
}

// usable are the states whose MAC address the kernel itself sends to.
const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE |
	netlink.NUD_PERMANENT | netlink.NUD_NOARP

// lookup answers the wanted addresses the kernel's table holds.
func (r *Resolver) lookup(h *netlink.Handle, wanted map[netip.Addr]time.Time) {
	ns, err := h.NeighList(r.link, unix.AF_INET)
	if err != nil {
		r.note(fmt.Errorf("kneigh: list neighbours: %w", err))
		return
	}
	for _, n := range ns {
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if _, want := wanted[ip]; !want || n.State&usable == 0 || len(n.HardwareAddr) != 6 {
			continue
		}
		a := answer{ip: ip}
		copy(a.mac[:], n.HardwareAddr)
		select {
		case r.ans <- a:
			delete(wanted, ip)
		default:
			// The poll loop has not collected earlier answers: try
			// again next tick.
		}
	}
}

func (r *Resolver) note(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}
