// Command cephdpdk-dump attaches to a service of a running cephdpdkd as
// a service process (package service) and writes the service's packets
// to a pcap file.
//
//	cephdpdk-dump --file-prefix cephdpdkd-port0 --service osd -w osd.pcap [-c N] [--duration D]
//
// It prints a progress line on stderr every second and a summary at the
// end; Ctrl-C stops it. The service must have consumer type process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/cephdpdkd/cephdpdkd/service"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("cephdpdk-dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prefix := fs.String("file-prefix", "", "the daemon's eal.file_prefix (required)")
	name := fs.String("service", "", "the service to attach to (required; consumer type process)")
	out := fs.String("w", "", "pcap file to write (required; - for stdout)")
	count := fs.Int("c", 0, "stop after this many packets (0: until interrupted)")
	duration := fs.Duration("duration", 0, "stop after this long (0: until interrupted)")
	quiet := fs.Bool("q", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *prefix == "" || *name == "" || *out == "" || *count < 0 || *duration < 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: cephdpdk-dump --file-prefix P --service S -w FILE [-c N] [--duration D] [-q]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	if err := dump(ctx, *prefix, *name, *out, *count, *quiet, stderr); err != nil {
		fmt.Fprintln(stderr, "cephdpdk-dump:", err)
		return 1
	}
	return 0
}

// dump attaches, then writes packets until ctx ends, count is reached,
// or the daemon stops.
func dump(ctx context.Context, prefix, name, path string, count int, quiet bool, stderr io.Writer) (err error) {
	var f *os.File
	if path == "-" {
		f = os.Stdout
	} else if f, err = os.Create(path); err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && path != "-" {
			err = cerr
		}
	}()
	start := time.Now()
	d, err := service.Join(service.JoinConfig{FilePrefix: prefix})
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := d.Attach(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	fmt.Fprintf(stderr, "attached to %s in %v\n", name, time.Since(start).Round(time.Millisecond))

	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return err
	}
	var pkts, bytes uint64
	begin := time.Now()
	next := begin.Add(time.Second)
	progress := func() {
		el := time.Since(begin).Seconds()
		fmt.Fprintf(stderr, "\r%d packets, %d bytes, %.0f pps", pkts, bytes, float64(pkts)/max(el, 1e-9))
	}
	idle := 0
	for ctx.Err() == nil && (count == 0 || pkts < uint64(count)) {
		n, err := s.Recv(s.Burst())
		if errors.Is(err, service.ErrClosing) {
			break
		}
		if err != nil && !errors.Is(err, service.ErrBusy) {
			return err
		}
		if count > 0 {
			n = min(n, count-int(pkts))
		}
		now := time.Now()
		for i := 0; i < n; i++ {
			fr := s.Frame(i)
			ci := captureInfo(now, fr, s.PktLen(i))
			if err := w.WritePacket(ci, fr); err != nil {
				return err
			}
			bytes += uint64(len(fr))
		}
		pkts += uint64(n)
		if n == 0 {
			// Nothing waiting: back off a little instead of spinning on
			// a CPU the daemon's loops may need.
			if idle++; idle > 64 {
				time.Sleep(50 * time.Microsecond)
			}
		} else {
			idle = 0
		}
		if !quiet && now.After(next) {
			progress()
			next = now.Add(time.Second)
		}
	}
	// With the daemon's ring still full, Release gives nothing back
	// (ErrBusy), and Close does, retrying: not an error.
	if err := s.Release(); err != nil && !errors.Is(err, service.ErrBusy) {
		return err
	}
	if !quiet {
		progress()
		fmt.Fprintln(stderr)
	}
	fmt.Fprintf(stderr, "%d packets written to %s\n", pkts, path)
	return nil
}

// captureInfo describes a frame for the pcap: a chained packet is
// written as its first segment, with its whole length recorded.
func captureInfo(t time.Time, frame []byte, pktLen int) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(frame), Length: max(pktLen, len(frame))}
}
