package session

import (
	"sync"
	"sync/atomic"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// Stats is a snapshot of a session's send buffers.
type Stats struct {
	// SendBuffers are the send buffers the session may hold: its own, or
	// its cap on a Pool's.
	SendBuffers int
	// SendBuffersInUse are those posted and not yet reaped.
	SendBuffersInUse int
}

// counters are written by the polling goroutine and read by Stats and
// Registry.Lookup on others, hence atomics.
type counters struct {
	sendBufs, sendBufsInUse atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{SendBuffers: int(c.sendBufs.Load()), SendBuffersInUse: int(c.sendBufsInUse.Load())}
}

// Stats returns a snapshot of the session's send buffers. Unlike the
// session's other methods it may be called from any goroutine. A
// released session reports none.
func (s *Session) Stats() Stats { return s.cnt.snapshot() }

// Registry publishes the Stats of live sessions, by endpoint and QP
// number, to goroutines other than the one polling the endpoints: a
// metrics collector joins them with the endpoints' per-QP counters. A
// session is in the Registry of its Config from its creation until its
// Release. The zero value is ready to use; it is safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	m  map[registryKey]*counters
}

type registryKey struct {
	ep  *roce.Endpoint
	qpn uint32
}

// Lookup returns the Stats of the live session on QP qpn of ep, and
// whether there is one.
func (r *Registry) Lookup(ep *roce.Endpoint, qpn uint32) (Stats, bool) {
	r.mu.Lock()
	c := r.m[registryKey{ep, qpn}]
	r.mu.Unlock()
	if c == nil {
		return Stats{}, false
	}
	return c.snapshot(), true
}

// Len returns the number of live sessions in the registry.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

func (r *Registry) add(k registryKey, c *counters) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[registryKey]*counters{}
	}
	r.m[k] = c
	r.mu.Unlock()
}

// remove forgets k if c is still its entry: a QP number reused by a
// later session belongs to that session.
func (r *Registry) remove(k registryKey, c *counters) {
	r.mu.Lock()
	if r.m[k] == c {
		delete(r.m, k)
	}
	r.mu.Unlock()
}

// publish sets the session's counters for its buffers and enters it in
// its registry.
func (s *Session) publish() {
	s.cnt.sendBufs.Store(int64(s.cfg.SendBuffers))
	s.cnt.sendBufsInUse.Store(0)
	if r := s.cfg.Registry; r != nil {
		r.add(s.registryKey(), &s.cnt)
	}
}

// unpublish clears the counters and takes the session out of its
// registry.
func (s *Session) unpublish() {
	s.cnt.sendBufs.Store(0)
	s.cnt.sendBufsInUse.Store(0)
	if r := s.cfg.Registry; r != nil {
		r.remove(s.registryKey(), &s.cnt)
	}
}

func (s *Session) registryKey() registryKey {
	return registryKey{s.qp.PD().Endpoint(), s.qp.QPN()}
}
