package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func rewrite(t *testing.T, path string, edits ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(y, edits[i]) {
			t.Fatalf("%s lacks %q", path, edits[i])
		}
		y = strings.Replace(y, edits[i], edits[i+1], 1)
	}
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The real binary reloads on SIGHUP while the sample capture plays:
// `cephdpdkd reload` checks the file, finds the daemon by its file
// prefix and reports the result it reads from the metrics; a service
// added and one rebuilt run at once; a file that changes the port, or
// that does not validate, is refused with its line and the daemon keeps
// running its configuration; the metrics count each result and carry
// the running file's hash; the shutdown still finds every mbuf.
func TestSIGHUPReload(t *testing.T) {
	needRoot(t)
	cfg := sampleConfig(t, "hup")
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", freePort(t))
	rewrite(t, cfg, `listen: "off"`, "listen: "+strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics"))
	p := startDaemon(t, cfg, nil)
	p.waitLog("metrics listening", 20*time.Second) // after the poll loops start
	started := sha256File(t, cfg)
	if m := scrape(t, url); !strings.Contains(m, `cephdpdkd_config_info{hash="`+started+`"} 1`) {
		t.Fatalf("metrics lack the starting config's hash %s:\n%s", started, m)
	}

	reload := func(wantCode int, wantOut string) {
		t.Helper()
		out, err := exec.Command(binary(t), "reload", "--config", cfg, "--wait", "20s").CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantCode || !strings.Contains(string(out), wantOut) {
			t.Fatalf("reload: exit %d, %q; want %d and %q\ndaemon:\n%s", code, out, wantCode, wantOut, p.logs)
		}
	}

	// A service added (with a rule), osd rebuilt with a smaller ring.
	rewrite(t, cfg,
		"  - name: unclaimed", "  - name: extra\n    ring_size: 256\n  - name: unclaimed",
		"    ring_size: 4096", "    ring_size: 2048",
		"rules:\n", "rules:\n  - service: extra\n    protocol: tcp\n    dst_ports: [1]\n")
	reload(0, "reloaded "+cfg)
	p.waitLog("configuration reloaded", 5*time.Second)
	reloaded := sha256File(t, cfg)
	m := scrape(t, url)
	for _, want := range []string{`cephdpdkd_config_reloads_total{result="ok"} 1`, `cephdpdkd_config_info{hash="` + reloaded + `"} 1`,
		`cephdpdkd_service_packets_total{service="extra"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The daemon refuses a new MTU; the file itself is valid.
	rewrite(t, cfg, "  tx_descriptors: 1024", "  tx_descriptors: 1024\n  mtu: 1400")
	reload(1, "refused the reload")
	p.waitLog("port.mtu: cannot change while the daemon runs", 5*time.Second)

	// An invalid file: the command says so with the line, and so does
	// the daemon when signalled directly.
	rewrite(t, cfg, "  mtu: 1400", "  mtu: 10")
	reload(1, "line 24: port.mtu: 10 is outside 68..9600")
	p.signal(syscall.SIGHUP)
	p.waitLog("line 24: port.mtu: 10 is outside 68..9600", 5*time.Second)
	m = scrape(t, url)
	for _, want := range []string{`cephdpdkd_config_reloads_total{result="error"} 2`, `cephdpdkd_config_info{hash="` + reloaded + `"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	p.running()
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Errorf("exit %d (%v)", code, p.err)
	}
	for _, want := range []string{"all mbufs returned", "stopped cleanly"} {
		if !strings.Contains(p.logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, p.logs)
		}
	}
}
