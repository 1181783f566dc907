package daemonproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialIn returns a DialContext that opens its connections inside the
// network namespace at nsPath: a socket belongs to the namespace it was
// made in, whichever thread uses it afterwards.
func dialIn(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			c, back, err := dialInLocked(ctx, nsPath, network, addr)
			if back {
				runtime.UnlockOSThread()
			}
			// Otherwise the thread stays locked and the runtime ends it
			// with this goroutine, rather than reuse it in the namespace.
			done <- result{c, err}
		}()
		r := <-done
		return r.c, r.err
	}
}

// dialInLocked dials from the calling, locked thread after moving it
// into nsPath; back reports whether the thread is in its own namespace
// again.
func dialInLocked(ctx context.Context, nsPath, network, addr string) (c net.Conn, back bool, err error) {
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("open own network namespace: %w", err)
	}
	defer unix.Close(own)
	target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("enter network namespace %s: %w", nsPath, err)
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, network, addr)
	if serr := unix.Setns(own, unix.CLONE_NEWNET); serr != nil {
		if c != nil {
			c.Close()
		}
		return nil, false, errors.Join(err, fmt.Errorf("leave network namespace %s: %w", nsPath, serr))
	}
	return c, true, err
}
