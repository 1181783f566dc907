package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages/hugepagestest"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemonBin.Remove()
	os.Exit(code)
}

// daemonBin is cephdpdkd, built once for the tests that run it as a process.
var daemonBin = daemonproc.Binary{Pkg: daemonproc.Package}

// binary returns the built cephdpdkd.
func binary(t *testing.T) string {
	t.Helper()
	return daemonBin.Path(t)
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCLIWithoutDPDK(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("port: {name: x, device: net_null0}\nservices: [{name: a}]\ndefault_service: b\n"), 0o600)
	// Configurations run used to refuse (or crash on) after check-config
	// passed them.
	longPort := filepath.Join(dir, "long-port.yaml")
	os.WriteFile(longPort, []byte("eal: {file_prefix: cdd-long}\nport:\n  name: "+strings.Repeat("p", 29)+"\n  device: net_null0\nservices: [{name: a}]\ndefault_service: a\n"), 0o600)
	emptyPcap := filepath.Join(dir, "empty.pcap")
	os.WriteFile(emptyPcap, []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}, 0o600)
	emptyReplay := filepath.Join(dir, "empty-replay.yaml")
	os.WriteFile(emptyReplay, []byte("eal: {no_huge: true, lcores: \"0-1\"}\nport:\n  name: x\n  device: net_pcap0,rx_pcap="+emptyPcap+",infinite_rx=1\nservices: [{name: a}]\ndefault_service: a\n"), 0o600)
	tests := []struct {
		args []string
		code int
		out  string // substring of stdout+stderr
	}{
		{[]string{"--version"}, 0, "cephdpdkd "},
		{[]string{}, 2, "usage:"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"check-config", "../../configs/cephdpdkd.yaml"}, 0, "mbuf pool: 16383 mbufs"},
		{[]string{"check-config", "--offline", "../../configs/examples/pci-nic-discard.yaml"}, 0, "poll loop on lcore 2: rx queues [1]"},
		// No machine running the tests has the example's PCI NIC.
		{[]string{"check-config", "../../configs/examples/pci-nic-discard.yaml"}, 1, "line 23: port.device: PCI device 0000:3b:00.0 does not exist on this machine"},
		{[]string{"check-config", longPort}, 1, "line 3: port.name: \"ppppppppppppppppppppppppppppp\" is 29 characters: the mbuf pool name \"cdd_ppppppppppppppppppppppppppppp\" would be 33, over DPDK's limit of 25 for mempool names (RTE_MEMPOOL_NAMESIZE)"},
		{[]string{"check-config", emptyReplay}, 1, "line 4: port.device: rx_pcap=" + emptyPcap + " holds no frames"},
		{[]string{"check-config", "--offline", emptyReplay}, 0, "ok"},
		{[]string{"run", "--duration", "-1s"}, 2, "--duration -1s"},
		{[]string{"check-config", bad}, 1, `line 3: default_service: "b" is not a defined service`},
		{[]string{"check-config"}, 2, "usage"},
		{[]string{"check-config", "/nonexistent.yaml"}, 1, "no such file"},
		{[]string{"run", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"pcap-check", "../../roce/testdata/rxe-rping-g1g2.pcapng"}, 0, "QP"},
		{[]string{"status", "--url", "http://127.0.0.1:1/metrics"}, 1, "scrape"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, o, e := runCLI(tt.args...)
			if code != tt.code || !strings.Contains(o+e, tt.out) {
				t.Errorf("exit %d (want %d), output does not contain %q:\n%s%s", code, tt.code, tt.out, o, e)
			}
		})
	}
}

// pcap-check exits 1 and names the frame when a capture has a corrupted
// RoCE frame.
func TestPcapCheckBadFrame(t *testing.T) {
	b, err := os.ReadFile("../../roce/testdata/rxe-rping-g1g2.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte near the end of the file: inside the last frame's
	// ICRC-covered payload or trailer.
	i := bytes.LastIndex(b, []byte{0x12, 0xb7}) // UDP dst 4791 of the last RoCE frame
	if i < 0 {
		t.Fatal("no RoCE frame found")
	}
	b[i+20] ^= 0x01
	path := filepath.Join(t.TempDir(), "bad.pcapng")
	os.WriteFile(path, b, 0o600)
	code, o, e := runCLI("pcap-check", path)
	if code != 1 || !strings.Contains(o, "frame") {
		t.Errorf("exit %d, output:\n%s%s", code, o, e)
	}
}

// The daemon as operators run it: start on a config, answer `status` from
// its metrics, stop on SIGTERM with exit 0 after the leak check.
func TestRunStatusAndSIGTERM(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for DPDK")
	}
	bin := binary(t)
	cfg, err := os.ReadFile("../../configs/cephdpdkd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(cfg), "listen: 127.0.0.1:9477", "listen: 127.0.0.1:19477", 1)
	y = strings.Replace(y, "file_prefix: cephdpdkd-sample", fmt.Sprintf("file_prefix: cdd-clitest-%d", os.Getpid()), 1)
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(y), 0o600)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", path, "--status=off")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	var status string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command(bin, "status", "--url", "http://127.0.0.1:19477/metrics", "--interval", "300ms").CombinedOutput()
		if err == nil {
			status = string(out)
			if strings.Contains(status, "osd") && !strings.Contains(status, "rx 0 pps") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, w := range []string{"rx ", "mon ", "osd ", "roce ", "unclaimed ", "mbufs "} {
		if !strings.Contains(status, w) {
			t.Errorf("status line %q lacks %q", status, w)
		}
	}
	t.Logf("status: %s", strings.TrimSpace(status))

	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "all mbufs returned") {
		t.Errorf("no leak check in the log:\n%s", logs.String())
	}
}

// hugepageMount reserves n 2 MiB hugepages and a hugetlbfs mount for the test,
// restoring what was there at cleanup. It skips when the kernel refuses.
func hugepageMount(t *testing.T, n int) string { return hugepagestest.Reserve(t, n) }

// The production memory path: the EAL on hugepages (not --no-huge), the
// pool and rings in them, and every mbuf back at shutdown.
func TestRunOnHugepages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for DPDK and hugepages")
	}
	hugepagestest.Lock(t)
	dir := hugepageMount(t, 256)
	bin := binary(t)
	cfg, err := os.ReadFile("../../configs/cephdpdkd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := string(cfg)
	for from, to := range map[string]string{
		"no_huge: true":                 "no_huge: false\n  huge_dir: " + dir,
		"memory_mb: 512":                "memory_mb: 256",
		"listen: 127.0.0.1:9477":        "listen: \"off\"",
		"file_prefix: cephdpdkd-sample": fmt.Sprintf("file_prefix: cdd-huge-%d", os.Getpid()),
	} {
		if !strings.Contains(y, from) {
			t.Fatalf("default config lacks %q", from)
		}
		y = strings.Replace(y, from, to, 1)
	}
	path := filepath.Join(t.TempDir(), "huge.yaml")
	os.WriteFile(path, []byte(y), 0o600)
	out, err := exec.Command(bin, "run", "--config", path, "--status=off", "--duration", "3s").CombinedOutput()
	if err != nil {
		t.Fatalf("run on hugepages: %v\n%s", err, out)
	}
	for _, want := range []string{"hugepages=true", "all mbufs returned", "stopped cleanly"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// eal.hugepages for real: the daemon reserves the pages and mounts
// hugetlbfs itself, the EAL runs on them, and at stop the machine's
// reservation is what it was. The daemon runs in a private mount
// namespace (unshare -m): its mount never shows outside.
func TestRunReservesHugepages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for DPDK and hugepages")
	}
	harness.RequireCommands(t, "util-linux", "unshare")
	const knob = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	hugepagestest.Lock(t)
	before, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("no 2M hugepages: %v", err)
	}
	bin := binary(t)
	mnt := filepath.Join(t.TempDir(), "huge")
	path := sampleConfig(t, "hugeres",
		"no_huge: true", "no_huge: false\n  hugepages: {pages: 160, size: 2M, mount: "+mnt+"}",
		"memory_mb: 512", "memory_mb: 256")
	runDir := t.TempDir()
	t.Cleanup(func() {
		// What the daemon recorded and did not give back (it died?):
		// restore-nic gives it back, as the unit's ExecStopPost would.
		if out, err := exec.Command(bin, "restore-nic", "--config", path, "--run-dir", runDir).CombinedOutput(); err != nil || strings.Contains(string(out), "hugepages") {
			t.Errorf("restore-nic after the run: %v\n%s", err, out)
		}
	})
	cmd := exec.Command("unshare", "-m", "--propagation", "private", bin, "run", "--config", path, "--status=off", "--duration", "3s", "--run-dir", runDir)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "the kernel granted") {
			t.Skipf("the kernel cannot provide the pages:\n%s", out)
		}
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, want := range []string{"msg=\"hugepages ready\" pages=160 size=2M mount=" + mnt, "mounted=true", "hugepages=true",
		"all mbufs returned", "msg=\"hugepages given back\"", "unmounted=" + mnt} {
		if !strings.Contains(string(out), want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "hugepages") {
			t.Log(l)
		}
	}
	if now, _ := os.ReadFile(knob); string(now) != string(before) {
		t.Errorf("nr_hugepages %s after the run, want %s", strings.TrimSpace(string(now)), strings.TrimSpace(string(before)))
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Errorf("the mount point the daemon created is left: %v", err)
	}
}
