package service

/*
#cgo pkg-config: libdpdk
#include <stdlib.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include "ctl.h"

// A session's process-local state: the rings looked up by name (a ring's
// address is the same in every process) and, for Go to read frames
// without a cgo call each, the received burst's data pointers and
// lengths.
struct cdd_svc_proc {
	struct cdd_svc_ctl *c;
	struct rte_ring *tx, *ret, *buf;
	uint16_t nlanes, next;
	struct rte_ring *lanes[CDD_SVC_MAX_LANES];
	uint64_t bytes;
	void *data[CDD_SVC_MAX_BURST];
	uint16_t len[CDD_SVC_MAX_BURST];
	uint32_t pkt_len[CDD_SVC_MAX_BURST];
};

enum { CDD_SVC_OK, CDD_SVC_NO_ZONE, CDD_SVC_NOT_READY, CDD_SVC_VERSION_MISMATCH, CDD_SVC_NO_RING, CDD_SVC_NO_POOL };

// cdd_svc_lookup finds the control block and everything it names. On
// CDD_SVC_NO_RING or CDD_SVC_NO_POOL, *missing is the name.
static int cdd_svc_lookup(const char *zone, struct cdd_svc_proc *p, const char **missing)
{
	const struct rte_memzone *mz = rte_memzone_lookup(zone);
	if (mz == NULL)
		return CDD_SVC_NO_ZONE;
	struct cdd_svc_ctl *c = mz->addr;
	if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != CDD_SVC_MAGIC)
		return CDD_SVC_NOT_READY;
	if (c->version != CDD_SVC_VERSION)
		return CDD_SVC_VERSION_MISMATCH;
	p->c = c;
	if (rte_mempool_lookup(c->pool) == NULL) {
		*missing = c->pool;
		return CDD_SVC_NO_POOL;
	}
	struct rte_ring **rings[3] = {&p->tx, &p->ret, &p->buf};
	const char *names[3] = {c->txname, c->retname, c->bufname};
	for (int i = 0; i < 3; i++)
		if ((*rings[i] = rte_ring_lookup(names[i])) == NULL) {
			*missing = names[i];
			return CDD_SVC_NO_RING;
		}
	p->nlanes = c->nlanes;
	for (uint16_t i = 0; i < c->nlanes; i++)
		if ((p->lanes[i] = rte_ring_lookup(c->lanes[i])) == NULL) {
			*missing = c->lanes[i];
			return CDD_SVC_NO_RING;
		}
	return CDD_SVC_OK;
}

static int cdd_svc_claim(struct cdd_svc_ctl *c, uint64_t owner, uint64_t *holder)
{
	uint64_t exp = 0;
	if (__atomic_compare_exchange_n(&c->owner, &exp, owner, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&c->last_owner, owner, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->claims, 1, __ATOMIC_RELEASE);
		return 0;
	}
	*holder = exp;
	return -EBUSY;
}

// cdd_svc_recv gives back the burst held (to ret), then takes up to max
// from the lanes, in turn, starting one lane further each call. It
// returns the count, -ENOBUFS when ret has no room yet, or -ESHUTDOWN
// when the daemon stops and nothing is left.
static int cdd_svc_recv(struct cdd_svc_proc *p, unsigned int max)
{
	struct cdd_svc_ctl *c = p->c;
	struct cdd_svc_held *h = &c->rx;
	c->heartbeat++;
	int r = cdd_svc_release(h, p->ret, CDD_SVC_RING_RET);
	if (r < 0)
		return r;
	if (max > c->burst)
		max = c->burst;
	for (uint16_t k = 0; k < p->nlanes && h->n < max; k++) {
		uint16_t i = p->next + k;
		if (i >= p->nlanes)
			i -= p->nlanes;
		cdd_svc_take(h, p->lanes[i], max);
	}
	if (++p->next >= p->nlanes)
		p->next = 0;
	uint32_t n = h->n;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = h->m[i];
		p->data[i] = rte_pktmbuf_mtod(m, void *);
		p->len[i] = m->data_len;
		p->pkt_len[i] = m->pkt_len;
		bytes += m->pkt_len;
	}
	p->bytes = bytes;
	c->rx_pkts += n;
	c->rx_bytes += bytes;
	if (n == 0 && __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	return (int)n;
}

// cdd_svc_give_back returns the burst held to the daemon.
static int cdd_svc_give_back(struct cdd_svc_proc *p)
{
	p->c->heartbeat++;
	return cdd_svc_release(&p->c->rx, p->ret, CDD_SVC_RING_RET);
}

// cdd_svc_forward sends the burst held out the port, all or nothing.
static int cdd_svc_forward(struct cdd_svc_proc *p)
{
	struct cdd_svc_ctl *c = p->c;
	c->heartbeat++;
	int r = cdd_svc_release(&c->rx, p->tx, CDD_SVC_RING_TX);
	if (r > 0)
		c->fwd_pkts += (uint64_t)r;
	return r;
}

// cdd_svc_send copies n frames packed back to back in buf (Go memory
// without pointers) into fresh mbufs from buf and puts them on tx. It
// takes no more than tx has room for, and we are tx's only producer, so
// the release cannot fail. Returns frames sent.
static int cdd_svc_send(struct cdd_svc_proc *p, const uint8_t *buf, const uint16_t *lens, unsigned int n)
{
	struct cdd_svc_ctl *c = p->c;
	struct cdd_svc_held *h = &c->tx;
	c->heartbeat++;
	unsigned int room = rte_ring_free_count(p->tx);
	if (n > room)
		n = room;
	if (n > CDD_SVC_MAX_BURST)
		n = CDD_SVC_MAX_BURST;
	unsigned int got = cdd_svc_take(h, p->buf, n);
	for (unsigned int i = 0; i < got; i++) {
		struct rte_mbuf *m = h->m[i];
		rte_pktmbuf_reset(m);
		memcpy(rte_pktmbuf_mtod(m, void *), buf, lens[i]);
		m->data_len = lens[i];
		m->pkt_len = lens[i];
		buf += lens[i];
	}
	if (got > 0)
		cdd_svc_release(h, p->tx, CDD_SVC_RING_TX);
	c->tx_pkts += got;
	return (int)got;
}

// cdd_svc_detach gives back what the session holds and frees it.
static int cdd_svc_detach(struct cdd_svc_proc *p, uint64_t owner)
{
	struct cdd_svc_ctl *c = p->c;
	int r = cdd_svc_release(&c->rx, p->ret, CDD_SVC_RING_RET);
	if (r < 0)
		return r;
	uint64_t exp = owner;
	if (!__atomic_compare_exchange_n(&c->owner, &exp, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return -EPERM;
	return 0;
}

static uint32_t cdd_svc_closing(struct cdd_svc_ctl *c) { return __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Errors a session returns.
var (
	// ErrClosing: the daemon stops and the service's lanes are empty;
	// Close the session.
	ErrClosing = errors.New("service: the daemon is stopping")
	// ErrBusy: the daemon has not yet taken what the session gave it
	// (its ret or tx ring is full); call again.
	ErrBusy = errors.New("service: the daemon's ring is full; try again")
	// ErrDaemonGone: the daemon the session attached to has exited (a
	// crash, or a kill): Close the session and the Daemon, and Join the
	// one that replaces it.
	ErrDaemonGone = errors.New("service: the daemon has exited")
	// ErrAttached: another process holds the service.
	ErrAttached = errors.New("service: another process is attached to the service")
	// ErrNoService: the daemon has no process service of that name.
	ErrNoService = errors.New("service: no such process service")
)

// Daemon is this process's DPDK secondary EAL, joined to a running
// cephdpdkd (the primary). One per process.
type Daemon struct {
	eal *pmd.EAL
}

// JoinConfig says which daemon to join.
type JoinConfig struct {
	// FilePrefix is the daemon's eal.file_prefix.
	FilePrefix string
	// Lcores is the EAL --lcores map of this process; default: lcore 0
	// on every CPU this process may run on, so that nothing is pinned
	// next to the daemon's poll loops.
	Lcores string
	// EALArgs are added to the EAL command line; default:
	// --log-level=*:warning.
	EALArgs []string
}

// Join starts a secondary EAL on the daemon's memory.
func Join(cfg JoinConfig) (*Daemon, error) {
	if cfg.Lcores == "" {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("service: CPUs of this process: %w", err)
		}
		var cpus []string
		for i := 0; i < len(set)*64; i++ {
			if set.IsSet(i) {
				cpus = append(cpus, strconv.Itoa(i))
			}
		}
		cfg.Lcores = "0@(" + strings.Join(cpus, ",") + ")"
	}
	if cfg.EALArgs == nil {
		cfg.EALArgs = []string{"--log-level=*:warning"}
	}
	eal, err := pmd.InitEAL(pmd.EALConfig{Lcores: cfg.Lcores, FilePrefix: cfg.FilePrefix, Secondary: true, ExtraArgs: cfg.EALArgs})
	if err != nil {
		return nil, fmt.Errorf("service: join the daemon on file prefix %q: %w", cfg.FilePrefix, err)
	}
	return &Daemon{eal: eal}, nil
}

// Close leaves the daemon. Close every session first.
func (d *Daemon) Close() error { return d.eal.Close() }

// Session is a service held by this process: it receives the
// service's packets zero-copy, one burst at a time, and sends frames
// out the daemon's port. One goroutine uses a session.
type Session struct {
	name    string
	p       *C.struct_cdd_svc_proc
	owner   uint64
	scratch []byte
	lens    []uint16
	// Views of the burst held: frames are read from mbuf memory.
	data   []unsafe.Pointer
	length []uint16
	pktLen []uint32
	n      int
	// idle counts the empty Recvs since the daemon was last seen alive;
	// gone is set once it was seen dead.
	idle int
	gone bool
}

// daemonCheckEvery is how many empty Recvs pass between two checks that
// the daemon still runs (a /proc read): a few milliseconds of idle
// polling, and nothing while packets flow.
const daemonCheckEvery = 1 << 14

// attachWait bounds how long Attach waits for a control block the
// daemon is still filling in.
const attachWait = time.Second

// Attach claims the named service for this process. It fails with
// ErrAttached while another live process holds it; a dead holder's
// session is freed by the daemon within its check interval.
func (d *Daemon) Attach(name string) (*Session, error) {
	p := (*C.struct_cdd_svc_proc)(C.calloc(1, C.sizeof_struct_cdd_svc_proc))
	if p == nil {
		return nil, errors.New("service: out of memory")
	}
	zone := C.CString(ControlName(name))
	defer C.free(unsafe.Pointer(zone))
	var missing *C.char
	rc := C.cdd_svc_lookup(zone, p, &missing)
	for deadline := time.Now().Add(attachWait); rc == C.CDD_SVC_NOT_READY && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		rc = C.cdd_svc_lookup(zone, p, &missing)
	}
	var err error
	switch rc {
	case C.CDD_SVC_OK:
	case C.CDD_SVC_NO_ZONE, C.CDD_SVC_NOT_READY:
		err = fmt.Errorf("%w: %q (no control block %s)", ErrNoService, name, ControlName(name))
	case C.CDD_SVC_VERSION_MISMATCH:
		err = fmt.Errorf("service: %q: the daemon speaks control block version %d, this library %d", name, p.c.version, C.CDD_SVC_VERSION)
	default:
		err = fmt.Errorf("service: %q: the daemon's %s is missing", name, C.GoString(missing))
	}
	if err != nil {
		C.free(unsafe.Pointer(p))
		return nil, err
	}
	pid := os.Getpid()
	start, err := StartTime(pid)
	if err != nil {
		C.free(unsafe.Pointer(p))
		return nil, fmt.Errorf("service: own start time: %w", err)
	}
	s := &Session{name: name, p: p, owner: Owner(pid, start)}
	var holder C.uint64_t
	if C.cdd_svc_claim(p.c, C.uint64_t(s.owner), &holder) != 0 {
		C.free(unsafe.Pointer(p))
		return nil, fmt.Errorf("%w: %q is held by pid %d", ErrAttached, name, uint32(holder))
	}
	if C.cdd_svc_closing(p.c) != 0 {
		C.cdd_svc_detach(p, C.uint64_t(s.owner))
		C.free(unsafe.Pointer(p))
		return nil, ErrClosing
	}
	s.data = unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(&p.data[0])), C.CDD_SVC_MAX_BURST)
	s.length = unsafe.Slice((*uint16)(unsafe.Pointer(&p.len[0])), C.CDD_SVC_MAX_BURST)
	s.pktLen = unsafe.Slice((*uint32)(unsafe.Pointer(&p.pkt_len[0])), C.CDD_SVC_MAX_BURST)
	return s, nil
}

// daemonAlive reports whether the daemon that published the control
// block still runs: its pid, with the start time it recorded.
func (s *Session) daemonAlive() bool {
	d := uint64(s.p.c.daemon)
	st, err := StartTime(int(uint32(d)))
	return err == nil && uint32(st) == uint32(d>>32)
}

// Name returns the service's name.
func (s *Session) Name() string { return s.name }

// Burst returns the most packets one Recv takes: the daemon's burst_size.
func (s *Session) Burst() int { return int(s.p.c.burst) }

// MaxFrame returns the longest frame Send takes.
func (s *Session) MaxFrame() int { return int(s.p.c.data_room) }

// Recv gives back the burst held, then receives up to max packets (at
// most Burst) from the service's lanes, and returns how many. Frame reads
// them until the next Recv, Release, Forward or Close. It returns 0 when
// nothing waits, ErrBusy when the daemon has not yet taken the last burst
// back, ErrClosing once the daemon stops and nothing is left, and
// ErrDaemonGone when, after a while without packets, the daemon is found
// to have exited without stopping (killed, crashed).
func (s *Session) Recv(max int) (int, error) {
	s.n = 0
	rc := int(C.cdd_svc_recv(s.p, C.uint(max)))
	if rc > 0 {
		s.n, s.idle = rc, 0
		return rc, nil
	}
	// Nothing: an idle service, a daemon that has not taken the last
	// burst back yet, or one that is gone.
	if s.idle++; s.idle >= daemonCheckEvery {
		s.idle = 0
		if !s.daemonAlive() {
			s.gone = true
			return 0, ErrDaemonGone
		}
	}
	switch rc {
	case -int(C.ENOBUFS):
		return 0, ErrBusy
	case -int(C.ESHUTDOWN):
		return 0, ErrClosing
	}
	return 0, nil
}

// Len returns the number of packets held.
func (s *Session) Len() int { return s.n }

// Bytes returns the total length of the packets held.
func (s *Session) Bytes() uint64 {
	if s.n == 0 {
		return 0
	}
	return uint64(s.p.bytes)
}

// Frame returns packet i's first segment, over mbuf memory: the whole
// frame unless it is a chain (PktLen says).
func (s *Session) Frame(i int) []byte { return unsafe.Slice((*byte)(s.data[i]), s.length[i]) }

// PktLen returns packet i's length, all segments together.
func (s *Session) PktLen(i int) int { return int(s.pktLen[i]) }

// Release gives the burst held back to the daemon now.
func (s *Session) Release() error {
	s.n = 0
	if C.cdd_svc_give_back(s.p) < 0 {
		return ErrBusy
	}
	return nil
}

// Forward sends the burst held out the daemon's port, zero-copy (frames
// may have been changed in place), all of it or, with ErrBusy, none.
func (s *Session) Forward() (int, error) {
	rc := int(C.cdd_svc_forward(s.p))
	if rc < 0 {
		return 0, ErrBusy
	}
	s.n = 0
	return rc, nil
}

// Send copies frames into fresh mbufs the daemon supplies and queues
// them for its port, and returns how many it took: a prefix of frames.
// Fewer than all (0 included) means the daemon's tx ring or supply is
// short for now; call again.
func (s *Session) Send(frames [][]byte) (int, error) {
	n := min(len(frames), C.CDD_SVC_MAX_BURST)
	if n == 0 {
		return 0, nil
	}
	s.scratch, s.lens = s.scratch[:0], s.lens[:0]
	for i, f := range frames[:n] {
		if len(f) == 0 || len(f) > s.MaxFrame() {
			return 0, fmt.Errorf("service: frame %d is %d bytes: want 1..%d", i, len(f), s.MaxFrame())
		}
		s.scratch = append(s.scratch, f...)
		s.lens = append(s.lens, uint16(len(f)))
	}
	sent := C.cdd_svc_send(s.p, (*C.uint8_t)(unsafe.Pointer(&s.scratch[0])), (*C.uint16_t)(unsafe.Pointer(&s.lens[0])), C.uint(n))
	return int(sent), nil
}

// Close gives back what the session holds and frees the service for
// another process. It waits (up to a second) for room in the daemon's
// ret ring.
func (s *Session) Close() error {
	if s.p == nil {
		return nil
	}
	s.n = 0
	if s.gone {
		// Nobody to give anything back to: the daemon's memory goes
		// with this process's mappings.
		C.free(unsafe.Pointer(s.p))
		s.p = nil
		return nil
	}
	var rc C.int
	for deadline := time.Now().Add(time.Second); ; runtime.Gosched() {
		if rc = C.cdd_svc_detach(s.p, C.uint64_t(s.owner)); rc != -C.ENOBUFS || time.Now().After(deadline) {
			break
		}
	}
	C.free(unsafe.Pointer(s.p))
	s.p = nil
	switch rc {
	case 0:
		return nil
	case -C.ENOBUFS:
		return fmt.Errorf("service: detach %q: %w (the daemon frees what this process holds once it exits)", s.name, ErrBusy)
	default:
		return fmt.Errorf("service: detach %q: the session is no longer this process's", s.name)
	}
}
