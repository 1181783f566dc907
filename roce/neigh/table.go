package neigh

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
)

// Table defaults.
const (
	DefaultMaxEntries    = 1024
	DefaultReachableTime = 60 * time.Second // Linux gc_stale_time
	DefaultRetransTime   = time.Second      // Linux retrans_time_ms
	DefaultMaxProbes     = 3                // Linux mcast_solicit
	DefaultMaxPending    = 256
)

// Resolution errors.
var (
	// ErrUnreachable: no ARP reply came after the last probe.
	ErrUnreachable = errors.New("neigh: address unreachable")
	// ErrPendingFull: too many callers are already waiting for replies.
	ErrPendingFull = errors.New("neigh: too many pending resolutions")
	// ErrInvalidAddress: the address is not a unicast IPv4 address other
	// than the table's own.
	ErrInvalidAddress = errors.New("neigh: invalid address")
)

// Config configures a Table.
type Config struct {
	MAC [6]byte
	IP  netip.Addr // the IPv4 address to answer ARP for
	// Send transmits one Ethernet frame, valid only during the call
	// (roce.Endpoint.SendFrame).
	Send func(frame []byte) error

	MaxEntries int // neighbours kept (DefaultMaxEntries if 0)
	// ReachableTime is how long an entry stays valid after traffic from
	// the neighbour last confirmed it (DefaultReachableTime if 0).
	ReachableTime time.Duration
	RetransTime   time.Duration // between who-has probes (DefaultRetransTime if 0)
	MaxProbes     int           // who-has probes before giving up (DefaultMaxProbes if 0)
	MaxPending    int           // callers waiting in Resolve, in total (DefaultMaxPending if 0)
	// Announce sends a gratuitous ARP for IP on the first Poll.
	Announce bool
	// Kernel, when set, resolves addresses in place of who-has
	// broadcasts: the kernel's own table, where IP is also the kernel's
	// and ARP replies reach the kernel, not the table (the af_xdp mode;
	// package kneigh). MaxProbes and RetransTime still bound a
	// resolution: each retransmission asks the kernel again.
	Kernel Kernel
}

// Kernel is a neighbour table the Table can ask without blocking.
type Kernel interface {
	// Request asks for ip's MAC address; false when it could not be
	// queued.
	Request(ip netip.Addr) bool
	// Next returns an answer to an earlier request, if one is waiting.
	Next() (ip netip.Addr, mac [6]byte, ok bool)
}

// Stats counts a table's work. Counters only grow.
type Stats struct {
	Entries          int // neighbours in the table
	Pending          int // addresses being resolved
	RequestsReceived uint64
	RepliesReceived  uint64
	RepliesSent      uint64 // answers to who-has for our address
	RequestsSent     uint64 // who-has probes and announcements
	KernelRequests   uint64 // resolutions asked of Config.Kernel
	Ignored          uint64 // ARP frames neither for us nor about a known neighbour
	Malformed        uint64 // ARP frames that failed to parse
	SendErrors       uint64 // frames Send refused
	Learned          uint64 // entries created
	Changed          uint64 // entries whose MAC address changed
	Expired          uint64 // entries removed after ReachableTime
	Evicted          uint64 // entries removed to make room
	Resolved         uint64 // waiters answered with an address
	Failed           uint64 // waiters answered with an error
}

type entry struct {
	mac     [6]byte
	expires time.Time
}

type waiter struct {
	done func(mac [6]byte, err error)
	mac  [6]byte
	err  error
}

type pending struct {
	probes  int       // who-has sent so far
	next    time.Time // next probe, or failure after the last one
	waiters []func(mac [6]byte, err error)
}

// Table is an ARP responder, neighbour table and resolver for one IPv4
// address. See the package comment for the goroutine rules.
type Table struct {
	cfg     Config
	ip      netip.Addr
	entries map[netip.Addr]entry
	pending map[netip.Addr]*pending
	nWait   int
	fired   []waiter // answers to deliver from the next Poll
	firing  []waiter
	started bool

	// The last address Learn refreshed, so per-packet learning from RoCE
	// frames skips the map while the same neighbour keeps talking.
	lastIP      netip.Addr
	lastMAC     [6]byte
	lastRefresh time.Time
	refresh     time.Duration

	nextSweep time.Time
	rx        ARP
	tx        ARP
	txBuf     [MinFrameLen]byte

	cnt struct {
		entries, pending                               atomic.Int64
		reqRx, repRx, repTx, reqTx, ignored, malformed atomic.Uint64
		sendErr, learned, changed, expired, evicted    atomic.Uint64
		resolved, failed, kernelReq                    atomic.Uint64
	}
}

// New returns a table answering for cfg.IP with cfg.MAC.
func New(cfg Config) (*Table, error) {
	ip := cfg.IP.Unmap()
	switch {
	case !ip.Is4() || ip.IsUnspecified() || ip.IsMulticast():
		return nil, fmt.Errorf("neigh: new table for %v: %w", cfg.IP, ErrInvalidAddress)
	case cfg.Send == nil:
		return nil, fmt.Errorf("neigh: new table for %v: no send function: %w", cfg.IP, ErrInvalidAddress)
	}
	orDefault(&cfg.MaxEntries, DefaultMaxEntries)
	orDefault(&cfg.MaxProbes, DefaultMaxProbes)
	orDefault(&cfg.MaxPending, DefaultMaxPending)
	orDefault(&cfg.ReachableTime, DefaultReachableTime)
	orDefault(&cfg.RetransTime, DefaultRetransTime)
	cfg.IP = ip
	return &Table{
		cfg:     cfg,
		ip:      ip,
		entries: make(map[netip.Addr]entry),
		pending: make(map[netip.Addr]*pending),
		refresh: min(time.Second, cfg.ReachableTime/4),
	}, nil
}

// IP returns the address the table answers for.
func (t *Table) IP() netip.Addr { return t.ip }

// MAC returns the MAC address the table answers with.
func (t *Table) MAC() [6]byte { return t.cfg.MAC }

// Len returns the number of neighbours in the table, expired ones not
// yet swept included.
func (t *Table) Len() int { return len(t.entries) }

// Stats returns the table's counters; it may be called from any goroutine.
func (t *Table) Stats() Stats {
	c := &t.cnt
	return Stats{
		Entries: int(c.entries.Load()), Pending: int(c.pending.Load()),
		RequestsReceived: c.reqRx.Load(), RepliesReceived: c.repRx.Load(),
		RepliesSent: c.repTx.Load(), RequestsSent: c.reqTx.Load(), KernelRequests: c.kernelReq.Load(),
		Ignored: c.ignored.Load(), Malformed: c.malformed.Load(), SendErrors: c.sendErr.Load(),
		Learned: c.learned.Load(), Changed: c.changed.Load(), Expired: c.expired.Load(),
		Evicted: c.evicted.Load(), Resolved: c.resolved.Load(), Failed: c.failed.Load(),
	}
}

// HandleFrame processes frame if it is an ARP frame and reports whether
// it was one. It answers who-has for the table's address, learns the
// sender of requests and replies addressed to us, refreshes known
// neighbours from any other ARP, and completes pending resolutions.
func (t *Table) HandleFrame(frame []byte, now time.Time) bool {
	if !IsARP(frame) {
		return false
	}
	a := &t.rx
	if err := ParseARP(frame, a); err != nil {
		t.cnt.malformed.Add(1)
		return true
	}
	// A promiscuous port also shows us unicast ARP between others.
	if a.DstMAC != broadcastMAC && a.DstMAC != t.cfg.MAC {
		t.cnt.ignored.Add(1)
		return true
	}
	sender := a.SenderIP
	validSender := sender != t.ip && usable(sender) && a.SenderMAC != broadcastMAC && a.SenderMAC[0]&1 == 0
	forUs := a.TargetIP == t.ip
	switch a.Op {
	case OpRequest:
		t.cnt.reqRx.Add(1)
	case OpReply:
		t.cnt.repRx.Add(1)
	}
	switch {
	case forUs && validSender:
		t.learn(sender, a.SenderMAC, now, true)
	case validSender:
		// Not about us: refresh what we know, create nothing (as Linux
		// does without arp_accept).
		if _, known := t.entries[sender]; known {
			t.learn(sender, a.SenderMAC, now, false)
		} else {
			t.cnt.ignored.Add(1)
		}
	default:
		if !forUs {
			t.cnt.ignored.Add(1)
		}
	}
	if a.Op == OpRequest && forUs && sender != t.ip && a.SenderMAC[0]&1 == 0 {
		t.reply(a)
	}
	return true
}

// usable reports whether ip may be a neighbour: a unicast IPv4 address.
func usable(ip netip.Addr) bool {
	return ip.Is4() && !ip.IsUnspecified() && !ip.IsMulticast() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// reply answers the who-has in req. An ARP probe (sender 0.0.0.0) gets
// its answer too, which is how a host defends its address.
func (t *Table) reply(req *ARP) {
	r := &t.tx
	*r = ARP{
		DstMAC: req.SenderMAC, SrcMAC: t.cfg.MAC, VLANs: req.VLANs,
		Op: OpReply, SenderMAC: t.cfg.MAC, SenderIP: t.ip, TargetMAC: req.SenderMAC, TargetIP: req.SenderIP,
	}
	if t.send(r) {
		t.cnt.repTx.Add(1)
	}
}

// probe broadcasts a who-has for ip (or, for our own address, a
// gratuitous ARP).
func (t *Table) probe(ip netip.Addr) {
	r := &t.tx
	*r = ARP{
		DstMAC: broadcastMAC, SrcMAC: t.cfg.MAC,
		Op: OpRequest, SenderMAC: t.cfg.MAC, SenderIP: t.ip, TargetIP: ip,
	}
	if t.send(r) {
		t.cnt.reqTx.Add(1)
	}
}

func (t *Table) send(a *ARP) bool {
	n, err := BuildARP(t.txBuf[:], a)
	if err == nil {
		err = t.cfg.Send(t.txBuf[:n])
	}
	if err != nil {
		t.cnt.sendErr.Add(1)
		return false
	}
	return true
}

// Learn records that ip uses mac, as seen in a frame received from it
// at now: it refreshes or corrects an existing entry, or creates one if
// the table has room (learning from traffic never evicts), and completes
// a pending resolution of ip. It is cheap enough to call for every
// received frame and allocates nothing for known neighbours.
func (t *Table) Learn(ip netip.Addr, mac [6]byte, now time.Time) {
	if ip == t.lastIP && mac == t.lastMAC && now.Sub(t.lastRefresh) < t.refresh && now.Sub(t.lastRefresh) >= 0 {
		return
	}
	if ip == t.ip || !usable(ip) || mac[0]&1 != 0 {
		return
	}
	t.learn(ip, mac, now, false)
}

// learn updates or creates the entry for ip. evict allows making room
// by removing the entry that expires first.
func (t *Table) learn(ip netip.Addr, mac [6]byte, now time.Time, evict bool) {
	t.lastIP, t.lastMAC, t.lastRefresh = ip, mac, now
	e, known := t.entries[ip]
	if !known {
		if len(t.entries) >= t.cfg.MaxEntries {
			t.sweep(now)
		}
		if len(t.entries) >= t.cfg.MaxEntries {
			if !evict {
				return
			}
			t.evictOldest()
		}
		t.cnt.learned.Add(1)
	} else if e.mac != mac {
		t.cnt.changed.Add(1)
	}
	t.entries[ip] = entry{mac: mac, expires: now.Add(t.cfg.ReachableTime)}
	t.cnt.entries.Store(int64(len(t.entries)))
	if p := t.pending[ip]; p != nil {
		t.finish(ip, p, mac, nil)
	}
}

func (t *Table) evictOldest() {
	var victim netip.Addr
	var at time.Time
	for ip, e := range t.entries {
		if !victim.IsValid() || e.expires.Before(at) {
			victim, at = ip, e.expires
		}
	}
	if victim.IsValid() {
		delete(t.entries, victim)
		t.cnt.evicted.Add(1)
	}
}

// sweep removes the expired entries.
func (t *Table) sweep(now time.Time) {
	for ip, e := range t.entries {
		if !now.Before(e.expires) {
			delete(t.entries, ip)
			t.cnt.expired.Add(1)
		}
	}
	t.cnt.entries.Store(int64(len(t.entries)))
	t.nextSweep = now.Add(t.cfg.ReachableTime / 4)
}

// Lookup returns the MAC address of ip if the table holds an entry that
// has not expired.
func (t *Table) Lookup(ip netip.Addr, now time.Time) ([6]byte, bool) {
	e, ok := t.entries[ip.Unmap()]
	if !ok || !now.Before(e.expires) {
		return [6]byte{}, false
	}
	return e.mac, true
}

// Resolve arranges for done to learn ip's MAC address: from a later Poll,
// at once if the table has a valid entry, else after an ARP reply, or
// with an error wrapping ErrUnreachable once MaxProbes who-has broadcasts
// RetransTime apart went unanswered. done never runs before Resolve
// returns. Resolve fails with ErrInvalidAddress for anything but a
// unicast IPv4 address other than the table's own, and with
// ErrPendingFull when MaxPending callers are already waiting.
func (t *Table) Resolve(ip netip.Addr, now time.Time, done func(mac [6]byte, err error)) error {
	ip = ip.Unmap()
	if ip == t.ip || !usable(ip) {
		return fmt.Errorf("neigh: resolve %v: %w", ip, ErrInvalidAddress)
	}
	if t.nWait >= t.cfg.MaxPending {
		return fmt.Errorf("neigh: resolve %v: %d waiting: %w", ip, t.nWait, ErrPendingFull)
	}
	if mac, ok := t.Lookup(ip, now); ok {
		t.fired = append(t.fired, waiter{done: done, mac: mac})
		return nil
	}
	p := t.pending[ip]
	if p == nil {
		p = &pending{next: now}
		t.pending[ip] = p
		t.cnt.pending.Store(int64(len(t.pending)))
		t.advance(ip, p, now)
	}
	p.waiters = append(p.waiters, done)
	t.nWait++
	return nil
}

// advance sends p's next probe or, after the last, fails it.
func (t *Table) advance(ip netip.Addr, p *pending, now time.Time) {
	if p.probes >= t.cfg.MaxProbes {
		t.finish(ip, p, [6]byte{}, fmt.Errorf("neigh: resolve %v: no reply to %d requests: %w", ip, p.probes, ErrUnreachable))
		return
	}
	if t.cfg.Kernel != nil {
		if t.cfg.Kernel.Request(ip) {
			t.cnt.kernelReq.Add(1)
		}
	} else {
		t.probe(ip)
	}
	p.probes++
	p.next = now.Add(t.cfg.RetransTime)
}

// finish hands p's waiters their answer for delivery from Poll.
func (t *Table) finish(ip netip.Addr, p *pending, mac [6]byte, err error) {
	for _, d := range p.waiters {
		t.fired = append(t.fired, waiter{done: d, mac: mac, err: err})
	}
	t.nWait -= len(p.waiters)
	delete(t.pending, ip)
	t.cnt.pending.Store(int64(len(t.pending)))
}

// Poll runs the table's timers at now: it sends the gratuitous ARP if
// configured, retransmits and fails resolutions, sweeps expired entries
// now and then, and calls the done functions of finished resolutions. It
// returns how many resolutions it finished and probes it sent.
func (t *Table) Poll(now time.Time) int {
	work := 0
	if !t.started {
		t.started = true
		t.nextSweep = now.Add(t.cfg.ReachableTime / 4)
		if t.cfg.Announce {
			t.probe(t.ip)
			work++
		}
	}
	if t.cfg.Kernel != nil {
		for {
			ip, mac, ok := t.cfg.Kernel.Next()
			if !ok {
				break
			}
			if ip != t.ip && usable(ip) && mac[0]&1 == 0 {
				t.learn(ip, mac, now, true)
				work++
			}
		}
	}
	for ip, p := range t.pending {
		if !now.Before(p.next) {
			t.advance(ip, p, now)
			work++
		}
	}
	if !now.Before(t.nextSweep) {
		t.sweep(now)
	}
	// Deliver from a second slice: a done function may call Resolve.
	for len(t.fired) > 0 {
		t.firing, t.fired = t.fired, t.firing[:0]
		for i := range t.firing {
			w := &t.firing[i]
			if w.err != nil {
				t.cnt.failed.Add(1)
			} else {
				t.cnt.resolved.Add(1)
			}
			if w.done != nil {
				w.done(w.mac, w.err)
			}
			*w = waiter{}
			work++
		}
	}
	return work
}

// NextDeadline returns when Poll next has a probe to send or a
// resolution to fail, if any resolution is pending. Expiry sweeps do not
// count: they only reclaim memory.
func (t *Table) NextDeadline() (time.Time, bool) {
	var d time.Time
	ok := false
	for _, p := range t.pending {
		if !ok || p.next.Before(d) {
			d, ok = p.next, true
		}
	}
	return d, ok
}

// Ready reports whether answers are waiting for the next Poll.
func (t *Table) Ready() bool { return len(t.fired) > 0 }

// orDefault sets *v to d when it is not positive: not set.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
