//go:build linux

package kernelif

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Dialer opens TCP connections from inside a network namespace. A socket
// belongs to the namespace of the thread that creates it, so a few OS
// threads join the namespace for good and create every socket; the
// connections are used from anywhere afterwards.
type Dialer struct {
	reqs  chan dialReq
	done  chan struct{}
	close sync.Once
}

type dialReq struct {
	ctx   context.Context
	addr  netip.AddrPort
	reply chan dialResult
}

type dialResult struct {
	c   net.Conn
	err error
}

// NewDialer starts a dialer in the namespace at ns (a name under
// /run/netns or a path); with ns empty it dials from the caller's own.
func NewDialer(ns string) (*Dialer, error) {
	d := &Dialer{reqs: make(chan dialReq), done: make(chan struct{})}
	ready := make(chan error, dialerThreads)
	for range dialerThreads {
		go d.serve(NamespacePath(ns), ready)
	}
	var first error
	for range dialerThreads {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		d.Close() // the threads that did enter the namespace end
		return nil, first
	}
	return d, nil
}

// dialerThreads is how many dials run at once: a connect waits for the
// peer's SYN-ACK on its thread, and a daemon whose accept backlog is full
// answers none.
const dialerThreads = 8

func (d *Dialer) serve(path string, ready chan<- error) {
	// The thread stays locked and is never handed back: when this
	// goroutine returns, the runtime destroys it instead of reusing a
	// thread that lives in another namespace.
	runtime.LockOSThread()
	if path != "" {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ready <- fmt.Errorf("kernelif: dialer: open network namespace %s: %w", path, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			ready <- fmt.Errorf("kernelif: dialer: enter network namespace %s: %w", path, err)
			return
		}
	}
	ready <- nil
	var nd net.Dialer
	for {
		select {
		case r := <-d.reqs:
			c, err := nd.DialContext(r.ctx, "tcp", r.addr.String())
			r.reply <- dialResult{c, err}
		case <-d.done:
			return
		}
	}
}

// ErrDialerClosed is returned by Dial after Close.
var ErrDialerClosed = errors.New("kernelif: dialer closed")

// Dial connects to addr from the dialer's namespace.
func (d *Dialer) Dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	r := dialReq{ctx: ctx, addr: addr, reply: make(chan dialResult, 1)}
	select {
	case d.reqs <- r:
	case <-d.done:
		return nil, ErrDialerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res := <-r.reply
	return res.c, res.err
}

// Close stops the dialer's thread; closing again does nothing.
func (d *Dialer) Close() { d.close.Do(func() { close(d.done) }) }
