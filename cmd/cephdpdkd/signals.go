package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// exitForced is the exit status when a second signal cuts a shutdown short.
const exitForced = 1

// daemonSignals sets up the daemon's signal handling. The returned context
// is canceled by the first SIGINT or SIGTERM; once it is canceled, by that
// or by cancel (the daemon stopping for another reason), another SIGINT or
// SIGTERM exits at once with status exitForced, without the rest of the
// shutdown and its mbuf leak check: a shutdown stuck draining should not
// need SIGKILL. SIGHUP asks for a configuration reload on the returned
// channel; SIGHUPs that arrive while one waits make one reload. SIGPIPE is ignored, so a closed stdout or stderr (a terminal gone, a
// log pipe closed) fails writes instead of killing the data path. stop
// ends the handling of SIGINT, SIGTERM and SIGHUP.
func daemonSignals(log *slog.Logger) (ctx context.Context, cancel context.CancelCauseFunc, reload <-chan struct{}, stop func()) {
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel = context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	hup := make(chan struct{}, 1)
	go func() {
		for {
			var s os.Signal
			select {
			case <-done:
				return
			case s = <-ch:
			}
			switch {
			case s == syscall.SIGHUP:
				select {
				case hup <- struct{}{}:
				default: // a reload is already asked for
				}
			case ctx.Err() == nil:
				cancel(fmt.Errorf("%v signal received", s))
			default:
				log.Error("second signal during shutdown: exiting now; the mbuf leak check was skipped", "signal", s.String())
				os.Exit(exitForced)
			}
		}
	}()
	return ctx, cancel, hup, func() {
		signal.Stop(ch)
		close(done)
	}
}
