package roced_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
)

// portIO is a roce.PacketIO straight on a DPDK port queue, for a test
// peer driven from the test goroutine.
type portIO struct {
	port    *pmd.Port
	pool    *mempool.Pool
	burst   *pmd.Burst
	scratch pmd.TxScratch
}

func (p *portIO) RecvBurst(frames [][]byte) int {
	p.burst.FreeAll()
	n := min(p.burst.RxBurst(p.port.ID(), 0), len(frames))
	for i := range n {
		frames[i] = p.burst.Frame(i)
	}
	return n
}

func (p *portIO) SendBurst(frames [][]byte) int {
	return pmd.TxCopy(p.port.ID(), 0, p.pool.C(), frames, &p.scratch)
}

// A Ceph async+rdma client exchanges QP records with the daemon over TCP,
// then runs its session over RC through the daemon's DPDK port (net_memif
// to a second port in this process): the echo service sends every byte
// back.
func TestCephAsyncRDMAOverDPDK(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "memif.sock")
	// RoCE addresses double as the TCP addresses of the exchange, so the
	// GID in each record matches the TCP peer as Ceph requires; on the
	// memif link they are just labels.
	const daemonIP, peerIP = "127.0.0.3", "127.0.0.2"
	y := roceOnlyConfig("ceph", "net_memif60,role=server,socket="+sock, 4096, daemonIP, `
  buffer_size: 65536
  send_buffers: 8
  recv_buffers: 8
  ceph_tcp:
    - {listen: "`+daemonIP+`:16800", app: echo}`)
	plan := newPlan(t, y)
	// The daemon's poll loop must be stopped before the peer port goes
	// (peerPort's cleanup does): DPDK's memif PMD unmaps the shared rings
	// on disconnect while a concurrent rx_burst may still read them.
	_, stopDaemon := startDaemon(t, plan, slog.New(slog.NewTextHandler(logWriter{t}, nil)))

	// The peer: a second port on the same memif socket.
	io, _ := peerPort(t, "net_memif61", "role=client,socket="+sock, 512, 4095, stopDaemon)
	ep, err := roce.NewEndpoint(roce.EndpointConfig{MAC: [6]byte{2, 0, 0x7f, 0, 0, 2}, IP: netip.MustParseAddr(peerIP), IO: io})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := cm.New(ep, cm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sc := cephrdma.DefaultConfig()
	sc.Resolver = mgr
	sc.Session.BufferSize, sc.Session.SendBuffers, sc.Session.RecvBuffers = 65536, 8, 8
	sc.Dialer = net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(peerIP)}}
	stack, err := cephrdma.New(ep, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()

	poll := func() {
		now := time.Now()
		ep.Poll(now)
		mgr.Poll(now)
		stack.Poll(now)
	}
	var conn *cephrdma.Conn
	var dialErr error
	dialed := false
	poll()
	if err := stack.Dial(daemonIP+":16800", func(c *cephrdma.Conn, err error) { conn, dialErr, dialed = c, err, true }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !dialed {
		if time.Now().After(deadline) {
			t.Fatal("exchange did not finish")
		}
		poll()
	}
	if dialErr != nil {
		t.Fatalf("dial: %v", dialErr)
	}
	local, remote := conn.Records()
	t.Logf("QP records: ours qpn %d psn %#x, daemon's qpn %d psn %#x", local.QPN, local.PSN, remote.QPN, remote.PSN)

	s := conn.Session()
	msg := make([]byte, 1<<20)
	for i := range msg {
		msg[i] = byte(i*13 + i>>8)
	}
	got := make([]byte, 0, len(msg))
	buf := make([]byte, 64<<10)
	sent := 0
	deadline = time.Now().Add(60 * time.Second)
	for len(got) < len(msg) {
		if time.Now().After(deadline) {
			t.Fatalf("echo stalled: sent %d, received %d", sent, len(got))
		}
		if sent < len(msg) {
			n, err := s.Send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			sent += n
		}
		poll()
		for {
			n, err := s.Recv(buf)
			if errors.Is(err, roce.ErrWouldBlock) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echoed stream differs")
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && ep.NumQPs() > 0; {
		poll()
	}
	t.Logf("1 MiB echoed through the Ceph async+rdma session over the DPDK port")
}

// peerPort opens vdev name (with devargs) as a second port of this
// process, the daemon's peer (the client end of its memif socket, or
// net_af_packet on the other end of its veth pair), for a test peer
// driven from the test goroutine, and waits for the link. Its cleanup
// stops the daemon first: DPDK's memif PMD unmaps the shared rings on
// disconnect while a concurrent rx_burst may still read them.
func peerPort(t *testing.T, name, devargs string, descs uint16, poolSize int, stopDaemon func()) (*portIO, *pmd.Port) {
	t.Helper()
	pool, err := mempool.New(mempool.Config{Name: "peer_" + name, Size: poolSize, CacheSize: 0, DataRoom: 2176, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	dev := name + "," + devargs
	var port *pmd.Port
	var burst *pmd.Burst
	t.Cleanup(func() {
		stopDaemon()
		if burst != nil {
			burst.Free()
		}
		if port != nil {
			port.Stop()
			port.Close()
			pmd.RemoveDevice(dev)
		}
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := pmd.ProbeDevice(dev); err != nil {
		t.Fatal(err)
	}
	if port, err = pmd.OpenPort(name); err != nil {
		t.Fatal(err)
	}
	if err := port.Configure(pmd.PortConfig{RxQueues: 1, TxQueues: 1, RxDescriptors: descs, TxDescriptors: descs}, pool.C()); err != nil {
		t.Fatal(err)
	}
	if err := port.Start(); err != nil {
		t.Fatal(err)
	}
	if burst, err = pmd.NewBurst(32); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if l, _ := port.Link(); l.Up {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%s: link did not come up", name)
		}
	}
	return &portIO{port: port, pool: pool, burst: burst}, port
}

// roceOnlyConfig is a configuration whose port (name, device) carries
// RoCE alone: the roce service, with a ring of ringSize, takes the frames
// of the endpoint at address, and the rest go unclaimed. roceMore holds
// the roce section's other keys, each line indented two spaces, after a
// newline.
func roceOnlyConfig(name, device string, ringSize int, address, roceMore string) string {
	return fmt.Sprintf(`
port: {name: %s, device: "%s"}
services:
  - {name: roce, ring_size: %d, consumer: {type: roce}}
  - {name: unclaimed}
default_service: unclaimed
roce:
  service: roce
  address: %s%s
metrics: {listen: "off"}
`, name, device, ringSize, address, roceMore)
}

// newPlan parses the configuration y and plans its daemon.
func newPlan(t *testing.T, y string) *daemon.Plan {
	t.Helper()
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := daemon.NewPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// startDaemon starts plan's data path on the test EAL. stop stops it once
// (later calls do nothing), checking that every mbuf came back; the test's
// cleanup calls it too.
func startDaemon(t *testing.T, plan *daemon.Plan, log *slog.Logger) (d *daemon.Daemon, stop func()) {
	t.Helper()
	d, err := daemon.Start(plan, daemon.Options{EAL: testEAL, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("daemon stop (leak check): %v", err)
		}
	}
	t.Cleanup(stop)
	return d, stop
}
