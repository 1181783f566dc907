//go:build linux

package systemd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

const (
	// xferPath is the guest's end of the TCP transfers (xferScript).
	xferPath = "/usr/local/bin/cdd-xfer"
	// kernelIface is the exception path's interface: port.name, the
	// kernel section's default.
	kernelIface = "data0"
	// xferBytes crosses the exception path each way in a transfer: many
	// times a 64 KiB GSO segment, which must be split to MTU-sized
	// frames before it goes out the e1000 (no TSO).
	xferBytes = 1 << 20
	// guestEcho and peerEcho are the ports of the echo servers: one the
	// osd service hands to the kernel, one the default service.
	guestEcho, peerEcho = 6800, 7001
	// xferTimeout bounds a transfer, which takes seconds; one that
	// stalls (frames the e1000 cannot send) fails in that time.
	xferTimeout = 45 * time.Second
	// maxFrame is the largest frame the port may send: kernel.mtu (the
	// port's, 1500 by default) and the Ethernet header.
	maxFrame = 1500 + 14
)

// xferScript is the guest's end of the transfers: "echo PORT" echoes one
// connection back as it arrives; "send HOST PORT BYTES" sends that many
// random bytes to an echo server, reads them back, and exits 0 when they
// came back whole, with their SHA-256.
const xferScript = `#!/usr/bin/python3
import hashlib, os, socket, sys, threading, time

def echo(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(1)
    c, _ = s.accept()
    c.settimeout(30)
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
        n += len(b)
    c.shutdown(socket.SHUT_WR)
    print("echoed", n)

def send(host, port, size):
    data = os.urandom(size)
    for _ in range(50):
        try:
            c = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            time.sleep(0.2)
    else:
        sys.exit("no connection to %s:%d" % (host, port))
    c.settimeout(30)
    def out():
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=out)
    t.start()
    got = bytearray()
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
    t.join()
    ok = bytes(got) == data
    print("%s sent %d sha256 %s, back %d sha256 %s" % ("ok" if ok else "MISMATCH", size,
        hashlib.sha256(data).hexdigest(), len(got), hashlib.sha256(got).hexdigest()))
    sys.exit(0 if ok else 1)

if sys.argv[1] == "echo":
    echo(int(sys.argv[2]))
else:
    send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
`

// checkVirtioUser runs the daemon with kernel.driver virtio_user, the
// exception path over /dev/vhost-net (the guest loads vhost_net at boot):
// its interface has the NIC's MAC and the guest's address, the peer and
// the guest ping each other and echo a TCP transfer back whole in each
// direction, every frame the kernel hands over fits the MTU (the
// interface negotiated no TSO, so the kernel segments: a 64 KiB GSO
// segment would not cross the e1000), nothing is dropped, and the stop
// gets every mbuf back and restores the NIC.
func (d *daemon) checkVirtioUser(t *testing.T, steps *timeline, peer *qemuvm.Peer) {
	if err := d.g.WriteFile(d.ctx, cfgPath, []byte(config(d.g.Interface, d.driver, "virtio_user")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("vhost-net: %s", strings.TrimSpace(d.run(t, "ls -l /dev/vhost-net; lsmod | grep -E '^(vhost_net|tun) ' | awk '{print $1}' | paste -sd' '")))
	if !t.Run("start", func(t *testing.T) { d.start(t, steps, false) }) {
		t.Fatal("the daemon did not start with virtio_user: the steps that need it are left out")
	}
	defer t.Run("stop restores the NIC", func(t *testing.T) {
		d.stop(t, steps)
		d.checkJournal(t, "all mbufs returned")
		if out := d.run(t, "ip -br link"); strings.Contains(out, kernelIface+" ") {
			t.Errorf("%s outlived the daemon:\n%s", kernelIface, out)
		}
	})

	t.Run("interface", func(t *testing.T) {
		out := d.run(t, fmt.Sprintf("cat /sys/class/net/%[1]s/address; ip -br addr show dev %[1]s; ethtool -i %[1]s | grep ^driver; "+
			"ethtool -k %[1]s | grep -E '^(tcp-segmentation-offload|tx-checksumming|generic-segmentation-offload):'", kernelIface))
		t.Logf("%s:\n%s", kernelIface, out)
		for _, want := range []string{d.g.MAC.String(), guestAddr.String(), "driver: tun", "tcp-segmentation-offload: off"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", kernelIface, want)
			}
		}
		d.checkJournal(t, "driver=virtio_user")
	})

	before := d.kernelCounters(t)
	t.Run("ping both ways", func(t *testing.T) {
		d.run(t, fmt.Sprintf("ping -c 3 -i 0.3 -W 2 %s", peerAddr.Addr()))
		if out, err := peer.Exec(d.ctx, "ping", "-c", "3", "-i", "0.3", "-W", "2", guestAddr.Addr().String()); err != nil {
			t.Errorf("peer ping: %v\n%s", err, out)
		}
	})
	t.Run("TCP from the peer", func(t *testing.T) {
		done := steps.begin(fmt.Sprintf("virtio_user: %d KiB echoed, peer → guest", xferBytes>>10))
		defer done()
		d.run(t, fmt.Sprintf("setsid %s echo %d >/tmp/echo.log 2>&1 </dev/null & "+
			"for i in $(seq 50); do ss -ltn | grep -q ':%d ' && exit 0; sleep 0.1; done; exit 1", xferPath, guestEcho, guestEcho))
		data := make([]byte, xferBytes)
		rand.Read(data)
		ctx, cancel := context.WithTimeout(d.ctx, xferTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", peer.NS, "socat", "-t", "30", "-T", "30", "-",
			fmt.Sprintf("TCP:%s:%d", guestAddr.Addr(), guestEcho))
		var back, errOut bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(data), &back, &errOut
		err := cmd.Run()
		t.Logf("sent %d bytes sha256 %x, back %d sha256 %x; guest: %s", len(data), sha256.Sum256(data), back.Len(), sha256.Sum256(back.Bytes()),
			strings.TrimSpace(d.run(t, "cat /tmp/echo.log")))
		if err != nil || !bytes.Equal(back.Bytes(), data) {
			t.Errorf("echo through the guest: %v %s; %d of %d bytes back, equal %v\n%s", err, errOut.String(), back.Len(), len(data),
				bytes.Equal(back.Bytes(), data), d.diagnose(t))
		}
	})
	t.Run("TCP from the guest", func(t *testing.T) {
		done := steps.begin(fmt.Sprintf("virtio_user: %d KiB echoed, guest → peer", xferBytes>>10))
		defer done()
		ctx, cancel := context.WithTimeout(d.ctx, xferTimeout)
		defer cancel()
		srv := exec.CommandContext(ctx, "ip", "netns", "exec", peer.NS, "socat", "-t", "30", "-T", "30",
			fmt.Sprintf("TCP-LISTEN:%d,bind=%s,reuseaddr", peerEcho, peerAddr.Addr()), "EXEC:cat")
		var srvOut bytes.Buffer
		srv.Stdout, srv.Stderr = &srvOut, &srvOut
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		out, code, err := d.g.Run(ctx, fmt.Sprintf("%s send %s %d %d", xferPath, peerAddr.Addr(), peerEcho, xferBytes))
		if err != nil || code != 0 {
			srv.Process.Kill()
		}
		serr := srv.Wait()
		t.Logf("guest: %s", strings.TrimSpace(out))
		if err != nil || code != 0 || !strings.HasPrefix(out, "ok ") {
			t.Errorf("echo through the peer: exit %d, %v, server %v %s\n%s", code, err, serr, srvOut.String(), d.diagnose(t))
		}
	})

	t.Run("frames fit the port", func(t *testing.T) {
		after := d.kernelCounters(t)
		tx, bytes := after["cephdpdkd_kernel_tx_packets_total"]-before["cephdpdkd_kernel_tx_packets_total"],
			after["cephdpdkd_kernel_tx_bytes_total"]-before["cephdpdkd_kernel_tx_bytes_total"]
		t.Logf("kernel → port: %.0f frames, %.0f bytes (%.0f a frame); counters after: %v", tx, bytes, bytes/max(tx, 1), after)
		// Both transfers' data went out the port, one way or the other.
		if bytes < 2*xferBytes {
			t.Errorf("the kernel sent %.0f bytes out the port, want at least the %d of the two transfers", bytes, 2*xferBytes)
		}
		if tx == 0 || bytes/tx > maxFrame {
			t.Errorf("the kernel's frames average %.0f bytes: above the %d an MTU-sized frame has, so segments bigger than the MTU came through", bytes/max(tx, 1), maxFrame)
		}
		for _, name := range []string{"cephdpdkd_service_drops_total", "cephdpdkd_service_consumer_drops_total", "cephdpdkd_kernel_tx_drops_total", "cephdpdkd_port_tx_errors_total",
			"cephdpdkd_kernel_interface_errors_total"} {
			if v, ok := after[name]; !ok || v != 0 {
				t.Errorf("%s is %v (exported %v), want 0", name, v, ok)
			}
		}
	})
}

// kernelCounters reads the daemon's counters of the exception path and
// its drops, summed over their labels.
func (d *daemon) kernelCounters(t *testing.T) map[string]float64 {
	t.Helper()
	fams := d.families(t, "cephdpdkd_(kernel_tx_|kernel_interface_|service_drops_total|service_consumer_drops_total|port_tx_errors_total)")
	sums := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			sums[name] += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sums
}
