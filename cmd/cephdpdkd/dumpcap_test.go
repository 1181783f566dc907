package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages/hugepagestest"
)

// TestDumpcap: DPDK's own dpdk-dumpcap and dpdk-pdump, secondary
// processes, capture live from the running daemon (on hugepages, as
// secondaries need), and every frame they write is one the daemon
// replays.
func TestDumpcap(t *testing.T) {
	needRoot(t)
	dumpcap, err := exec.LookPath("dpdk-dumpcap")
	if err != nil {
		t.Skipf("no dpdk-dumpcap (Debian's dpdk package): %v", err)
	}
	hugepagestest.Lock(t)
	dir := hugepageMount(t, 256)
	// A secondary probes the primary's vdevs again, with their devargs:
	// net_pcap's capture must be a file that stays (the embedded sample's
	// temporary copy is removed once the daemon has it open).
	// It must also be a short path: net_pcap hands a secondary at most 63
	// bytes of its arguments (a CI checkout's path is longer).
	short, err := os.MkdirTemp("", "cdd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	sample := filepath.Join(short, "sample.pcap")
	b, err := os.ReadFile("../../configs/sample/ceph-node.pcap")
	if err == nil {
		err = os.WriteFile(sample, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := sampleConfig(t, "dumpcap", "no_huge: true", "no_huge: false\n  huge_dir: "+dir, "memory_mb: 512", "memory_mb: 256",
		"rx_pcap={{sample_pcap}}", "rx_pcap="+sample)
	p := startDaemon(t, cfg, nil)
	p.waitLog("poll loop started", 30*time.Second)
	m := regexp.MustCompile(`command="dpdk-dumpcap --file-prefix=(\S+) -i (\S+) `).FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("the daemon does not announce live capture:\n%s", p.logs)
	}
	out := filepath.Join(t.TempDir(), "live.pcapng")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, dumpcap, "--file-prefix="+m[1], "-i", m[2], "-c", "1000", "-w", out, "-q")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s\ndaemon:\n%s", cmd, err, b, p.logs)
	}
	t.Logf("dpdk-dumpcap took 1000 frames in %v", time.Since(start).Round(time.Millisecond))

	want := map[string]bool{}
	for _, f := range readFrames(t, "../../configs/sample/ceph-node.pcap", false) {
		want[string(f)] = true
	}
	got := readFrames(t, out, true)
	if len(got) < 1000 {
		t.Errorf("%d frames captured, want 1000", len(got))
	}
	for i, f := range got {
		if !want[string(f)] {
			t.Fatalf("captured frame %d (%d bytes) is not in the replayed capture", i, len(f))
		}
	}

	// dpdk-pdump, the older tool: rx of port 0 to a pcap until SIGINT.
	if pdump, err := exec.LookPath("dpdk-pdump"); err == nil {
		rx := filepath.Join(t.TempDir(), "rx.pcap")
		cmd := exec.Command(pdump, "-l", "0", "--file-prefix="+m[1], "--no-pci", "--log-level=*:warning", "--",
			"--pdump", "port=0,queue=*,rx-dev="+rx)
		var log strings.Builder
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// It copies every frame while it runs (over half a million a
		// second here): stop it once the file has some. Its EAL start
		// takes seconds on a loaded machine.
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if fi, err := os.Stat(rx); err == nil && fi.Size() > 1<<20 {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("dpdk-pdump did not stop on SIGINT:\n%s", &log)
		}
		if _, serr := os.Stat(rx); serr != nil {
			t.Fatalf("dpdk-pdump (%v) wrote no %s in 30 s:\n%s\ndaemon:\n%s", err, rx, &log, p.logs)
		}
		frames := readFrames(t, rx, false)
		if err != nil || len(frames) == 0 {
			t.Fatalf("dpdk-pdump: %v, %d frames\n%s", err, len(frames), &log)
		}
		for i, f := range frames {
			if !want[string(f)] {
				t.Fatalf("dpdk-pdump frame %d (%d bytes) is not in the replayed capture", i, len(f))
			}
		}
		t.Logf("dpdk-pdump took %d frames", len(frames))
	}

	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 || !strings.Contains(p.logs.String(), "all mbufs returned") {
		t.Fatalf("stop: exit %d\n%s", code, p.logs)
	}
	// Each tool's stop removed pdump's callbacks through the daemon's
	// wrapper, which waited for the poll loop to leave them (pmd.Quiescence):
	// without it the daemon crashed now and then as a tool freed its pool.
	m = regexp.MustCompile(`msg="capture callbacks removed after the poll loops left them" removals=(\d+) waited=(\S+) timed_out=0`).FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("the daemon did not wait out pdump's callback removals:\n%s", p.logs)
	}
	t.Logf("pdump removed %s callbacks; the daemon waited %s in all for its poll loop to leave them", m[1], m[2])
}

// readFrames returns every frame of a pcap or pcapng file.
func readFrames(t *testing.T, path string, ng bool) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var next func() ([]byte, error)
	if ng {
		r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		next = func() ([]byte, error) { b, _, err := r.ReadPacketData(); return b, err }
	} else {
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		next = func() ([]byte, error) { b, _, err := r.ReadPacketData(); return b, err }
	}
	var frames [][]byte
	for {
		b, err := next()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("%s: frame %d: %v", path, len(frames), fmt.Errorf("read: %w", err))
		}
		frames = append(frames, b)
	}
}
