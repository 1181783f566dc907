//go:build linux

package qemuvm

import (
	"context"
	"errors"
	"io"
	"sync"
)

// ErrConsoleClosed reports that a guest's console ended: qemu exited, or
// closed the port.
var ErrConsoleClosed = errors.New("console closed (qemu exited)")

// Console accumulates everything a guest writes to a serial port and lets
// callers wait for text to appear in it.
type Console struct {
	mu      sync.Mutex
	buf     []byte        // console output with carriage returns removed
	changed chan struct{} // closed and replaced whenever buf grows or the console closes
	closed  bool
	esc     int // escape sequence state across reads
}

// NewConsole returns an empty console; Collect fills it.
func NewConsole() *Console {
	return &Console{changed: make(chan struct{})}
}

// Collect copies r into the console until r fails, then marks the
// console closed.
func (c *Console) Collect(r io.Reader) {
	p := make([]byte, 4096)
	for {
		n, err := r.Read(p)
		if n > 0 {
			c.append(p[:n])
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	c.closed = true
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// append adds guest output to the console. The guest's tty turns "\n" into
// "\r\n", and ash's line editor sends "\r" and escape sequences (a cursor
// position query at every prompt) to redraw its line: all of them are
// dropped, so the log reads as plain text.
func (c *Console) append(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range p {
		switch c.esc {
		case escNone:
			switch ch {
			case '\r':
			case 0x1b:
				c.esc = escStart
			default:
				c.buf = append(c.buf, ch)
			}
		case escStart:
			c.esc = escNone // a two-byte sequence, such as ESC 7
			if ch == '[' {
				c.esc = escCSI
			}
		case escCSI:
			if ch >= 0x40 && ch <= 0x7e { // final byte
				c.esc = escNone
			}
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// Escape sequence states of Console.append; a sequence may span reads.
const (
	escNone  = iota
	escStart // after ESC
	escCSI   // inside ESC [ ... final
)

// Len returns the number of bytes the console holds so far.
func (c *Console) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf)
}

// String returns everything the console holds.
func (c *Console) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// WaitFor calls match with the console output from offset from on, each
// time it grows, until match reports done. match must not keep the slice.
// WaitFor fails when ctx ends or the console closes first.
func (c *Console) WaitFor(ctx context.Context, from int, match func(out []byte) (done bool)) error {
	for {
		c.mu.Lock()
		done := match(c.buf[min(from, len(c.buf)):])
		closed, changed := c.closed, c.changed
		c.mu.Unlock()
		switch {
		case done:
			return nil
		case closed:
			return ErrConsoleClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
