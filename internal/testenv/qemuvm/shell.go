//go:build linux

package qemuvm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DeadlineWriter is the side of a serial port a Shell types on: a pipe
// (*os.File) or a socket (net.Conn).
type DeadlineWriter interface {
	io.Writer
	SetWriteDeadline(t time.Time) error
}

// Shell runs commands, one at a time, in a guest shell that reads a serial
// port and writes to it: each command's output and exit status are found
// in the port's Console between markers the command line prints.
type Shell struct {
	con     *Console
	w       DeadlineWriter
	prefix  string // starts every error: "rxeguest: g1"
	maxLine int

	mu  sync.Mutex // one command at a time
	seq int        // numbers the commands; guarded by mu
}

// NewShell returns a Shell typing on w and reading con. Errors start with
// prefix. maxLine bounds a command line, markers included: the guest
// shell's line editor or tty may keep no more.
func NewShell(con *Console, w DeadlineWriter, prefix string, maxLine int) *Shell {
	return &Shell{con: con, w: w, prefix: prefix, maxLine: maxLine}
}

// sendTimeout bounds a write to the port when ctx has no earlier
// deadline: a guest that does not read its port any more is dead.
const sendTimeout = 10 * time.Second

// Run runs a shell command in the guest and returns its standard output and
// error (interleaved, as the port shows them) and its exit status. The
// command runs in a subshell with standard input from /dev/null, so that
// neither exit nor a tool reading stdin can take the shell. err is non-nil
// when the command's completion was not seen: ctx ended (the command then
// gets ^C) or the port closed; exitCode is then -1. Commands are one line.
func (s *Shell) Run(ctx context.Context, cmd string) (out string, exitCode int, err error) {
	if strings.ContainsAny(cmd, "\n\r") {
		return "", -1, fmt.Errorf("%s: command has a line break: %q", s.prefix, cmd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	begin := fmt.Sprintf("__CDDB%d__", s.seq)
	end := fmt.Sprintf("__CDDE%d__ ", s.seq)
	// Each marker is typed with an empty string inside it, so the echoed
	// command line never matches; only the output of echo does.
	line := fmt.Sprintf("echo %s; ( eval %s ) </dev/null; echo %s$?\n",
		splitMarker(begin), ShellQuote(cmd), splitMarker(end))
	if len(line) > s.maxLine {
		return "", -1, fmt.Errorf("%s: command of %d bytes is too long", s.prefix, len(line))
	}

	from := s.con.Len()
	if err := s.Send(ctx, line); err != nil {
		return "", -1, err
	}
	var (
		body []byte
		code = -1
	)
	werr := s.con.WaitFor(ctx, from, func(log []byte) bool {
		b := bytes.Index(log, []byte(begin+"\n"))
		if b < 0 {
			return false
		}
		rest := log[b+len(begin)+1:]
		e := bytes.Index(rest, []byte(end))
		if e < 0 {
			body = append(body[:0], rest...)
			return false
		}
		nl := bytes.IndexByte(rest[e:], '\n')
		if nl < 0 {
			return false
		}
		body = append(body[:0], rest[:e]...)
		c, err := strconv.Atoi(string(rest[e+len(end) : e+nl]))
		if err != nil {
			c = -1
		}
		code = c
		return true
	})
	if werr != nil {
		if ctx.Err() != nil {
			// Interrupt the command so the shell is usable again.
			s.Send(context.Background(), "\x03")
		}
		return string(body), -1, fmt.Errorf("%s: %q: %w", s.prefix, cmd, werr)
	}
	return string(body), code, nil
}

// Send types text on the port as it is.
func (s *Shell) Send(ctx context.Context, text string) error {
	deadline := time.Now().Add(sendTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.w.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("%s: console: %w", s.prefix, err)
	}
	if _, err := io.WriteString(s.w, text); err != nil {
		return fmt.Errorf("%s: console: %w", s.prefix, err)
	}
	return nil
}

// Next returns a number no other call of Next or Run on s has used, for
// names (of files, of markers) that must not collide.
func (s *Shell) Next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

// splitMarker returns a shell word that echo prints as m but that does
// not contain m itself.
func splitMarker(m string) string { return m[:3] + `""` + m[3:] }

// ShellQuote quotes s as a single POSIX shell word.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Escape escapes a value for qemu's comma-separated option syntax.
func Escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
