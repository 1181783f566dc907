package cephnode

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

// TestTryCeph runs the newcomer's first command (scripts/try-ceph.sh's
// tool, internal/tools/tryceph) for real, with short benches, and holds
// it to its summary: every object it wrote reads back byte-identical,
// the RoCE part ran wherever a Soft-RoCE guest can be built here and
// bridged sessions then, the daemon stopped with every mbuf back, and
// nothing it made is left. A second run is interrupted once its cluster
// is up (SIGINT, as Ctrl-C): it must clean up all the same.
func TestTryCeph(t *testing.T) {
	requireTools(t)
	daemon := buildDaemon(t)
	tool := filepath.Join(t.TempDir(), "cephdpdkd-try")
	if err := daemonproc.Build(context.Background(), "github.com/cephdpdkd/cephdpdkd/internal/tools/tryceph", tool); err != nil {
		t.Fatal(err)
	}
	roceHere := rxeguest.CephAvailable()

	t.Run("run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		out, err := tryCephCommand(ctx, tool, "--daemon", daemon, "--bench", "2s").CombinedOutput()
		t.Logf("tryceph ran %.1f s:\n%s", time.Since(start).Seconds(), out)
		if err != nil {
			t.Fatalf("tryceph: %v", err)
		}
		s := string(out)
		written, identical := summaryInts(t, s, `objects\s+(\d+) written and read back, (\d+) byte-identical`)
		sessions, _ := summaryInts(t, s, `sessions\s+(\d+) RoCE sessions bridged`)
		roceRan := !strings.Contains(s, "RoCE      not run:")
		switch {
		case identical != written:
			t.Errorf("%d of %d objects read back identical", identical, written)
		case written < 3: // 3 over TCP, 2 more over RoCE
			t.Errorf("only %d objects written", written)
		case roceRan && written < 5:
			t.Errorf("RoCE ran but only %d objects were written", written)
		}
		if roceRan && sessions == 0 {
			t.Errorf("RoCE ran but no session was bridged")
		}
		if !roceRan && roceHere == nil {
			t.Errorf("the RoCE part did not run although a Soft-RoCE guest can run here")
		}
		if !roceRan {
			t.Logf("RoCE part not run here (%v); the TCP part was checked", roceHere)
		}
		if !strings.Contains(s, "every mbuf returned") {
			t.Errorf("the summary does not report a clean stop of the daemon")
		}
		checkGone(t, s)
	})

	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := tryCephCommand(ctx, tool, "--daemon", daemon, "--roce", "off")
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait(); pw.Close() }()
		for l := range lines {
			out.WriteString(l + "\n")
			// The cluster is up and the first client runs: everything is
			// there to clean up.
			if strings.Contains(l, "TCP: rados from") {
				cmd.Process.Signal(syscall.SIGINT)
			}
		}
		err := <-waited
		t.Logf("interrupted tryceph:\n%s", out.String())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("tryceph after SIGINT: %v; want exit status 130", err)
		}
		checkGone(t, out.String())
	})
}

// tryCephCommand runs the tool; past ctx's deadline it gets SIGINT, as
// from Ctrl-C, and a minute to clean up before SIGKILL.
func tryCephCommand(ctx context.Context, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	return cmd
}

// summaryInts returns the two numbers re's groups match in s (the
// second 0 without one), and fails the test without a match.
func summaryInts(t *testing.T, s, re string) (a, b int) {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %q in the output", re)
	}
	a, _ = strconv.Atoi(m[1])
	if len(m) > 2 {
		b, _ = strconv.Atoi(m[2])
	}
	return a, b
}

// checkGone checks that the namespaces the run names are gone and that
// no process names them (qemu, ceph daemons, `ip netns exec` clients).
func checkGone(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`network: client namespace (\S+) .* in (\S+) \(`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the output names no namespaces")
	}
	for _, ns := range m[1:] {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Errorf("namespace %s left behind", ns)
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.Contains(string(b), ns) {
				t.Errorf("process %s left behind: %s", e.Name(), strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	}
	if !strings.Contains(out, "cleaned up: namespaces") {
		t.Errorf("the output does not report the cleanup")
	}
}
