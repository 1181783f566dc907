package roced_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// bridgeRig is the daemon as a bridge node: its RoCE⇄TCP bridge reached
// over its DPDK port (net_af_packet on a veth pair whose other end is a
// second port of this process, where the test's own rdma_cm clients
// run), its kernel interface in a namespace of its own. Subnet 10.<net>.0.0/24:
// the node is .2, the peer .1.
type bridgeRig struct {
	node           *testenv.NetNS
	nodeIP, peerIP netip.Addr
	ifPeer         string
	vdev           int // the daemon's port is net_af_packet<vdev>, the peer's <vdev+1>
	plan           *daemon.Plan

	// Set by start.
	d          *daemon.Daemon
	stopDaemon func()
	ep         *roce.Endpoint
	mgr        *cm.Manager
}

// bridgeConfig is what the bridge tests' nodes differ in.
type bridgeConfig struct {
	net                      byte   // the subnet's second octet
	vdev                     int    // see bridgeRig
	ifPrefix                 string // of the kernel interface's name
	sendBuffers, recvBuffers int
	memoryMB, maxSessions    int
	ports                    string // roce.bridge.ports
}

// newBridgeRig creates the node's namespace and veth pair and plans its
// daemon; the test sets up the node's TCP side before start.
func newBridgeRig(t *testing.T, c bridgeConfig) *bridgeRig {
	t.Helper()
	node := testenv.NewNetNS(t)
	ifDaemon, ifPeer := testenv.NewVethPair(t)
	nodeIP, peerIP := netip.AddrFrom4([4]byte{10, c.net, 0, 2}), netip.AddrFrom4([4]byte{10, c.net, 0, 1})
	ifname := c.ifPrefix + node.Name[len(node.Name)-6:]
	y := fmt.Sprintf(`
port: {name: br, device: "net_af_packet%d,iface=%s,framecnt=2048"}
services:
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other, consumer: {type: kernel}}
default_service: other
kernel: {interface: %s, netns: %s, addresses: [%s/24]}
roce:
  service: roce
  address: %s
  buffer_size: 131072
  send_buffers: %d
  recv_buffers: %d
  memory_mb: %d
  max_sessions: %d
  bridge: {ports: ["%s"]}
metrics: {listen: "off"}
`, c.vdev, ifDaemon, ifname, node.Name, nodeIP, nodeIP, c.sendBuffers, c.recvBuffers, c.memoryMB, c.maxSessions, c.ports)
	return &bridgeRig{node: node, nodeIP: nodeIP, peerIP: peerIP, ifPeer: ifPeer, vdev: c.vdev, plan: newPlan(t, y)}
}

// start starts the daemon, then the peer's port, RoCE endpoint and
// connection manager.
func (r *bridgeRig) start(t *testing.T, log *slog.Logger, cmc cm.Config) {
	t.Helper()
	r.d, r.stopDaemon = startDaemon(t, r.plan, log)
	pio, _ := peerPort(t, fmt.Sprintf("net_af_packet%d", r.vdev+1), "iface="+r.ifPeer+",framecnt=2048", 1024, 8191, r.stopDaemon)
	var err error
	r.ep, err = roce.NewEndpoint(roce.EndpointConfig{MAC: [6]byte{2, 0, 10, r.peerIP.As4()[1], 0, 1}, IP: r.peerIP, IO: pio})
	if err != nil {
		t.Fatal(err)
	}
	if r.mgr, err = cm.New(r.ep, cmc); err != nil {
		t.Fatal(err)
	}
}

// bridgeClient is one of the peer's rdma_cm connections, its state as
// its events leave it.
type bridgeClient struct {
	qp        *roce.QP
	s         *session.Session
	conn      *cm.Conn
	connected bool
	err       error
	down      bool
}

// dial connects a client to port of the node; it does not wait for the
// answer.
func (r *bridgeRig) dial(t *testing.T, pd *roce.PD, sc session.Config, port uint16) *bridgeClient {
	t.Helper()
	c := &bridgeClient{}
	var err error
	if c.qp, err = session.NewQP(pd, sc); err != nil {
		t.Fatal(err)
	}
	if c.s, err = session.New(c.qp, sc); err != nil {
		t.Fatal(err)
	}
	c.conn, err = r.mgr.Dial(r.nodeIP, port, c.qp, nil, cm.Events{
		Connected:    func(_ *cm.Conn, err error) { c.connected, c.err = true, err },
		Disconnected: func(_ *cm.Conn, err error) { c.down = true },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// release destroys the client's QP, its session and its CQs.
func (c *bridgeClient) release() {
	scq, rcq := c.qp.SendCQ(), c.qp.RecvCQ()
	c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	c.s.Release()
	c.qp.Destroy()
	scq.Destroy()
	rcq.Destroy()
}

// TestBridgeOverDPDK: the daemon's RoCE⇄TCP bridge (a bridgeRig) relays a
// stream to a TCP sink listening on the node's address in the kernel
// interface's namespace, and an echo back. The same bytes then cross
// kernel TCP on a veth pair between two namespaces, for the throughput
// ratio.
func TestBridgeOverDPDK(t *testing.T) {
	testenv.RequireRoot(t)
	const sinkPort, echoPort, closedPort = 6800, 6801, 6802
	rig := newBridgeRig(t, bridgeConfig{net: 88, vdev: 70, ifPrefix: "cddb", sendBuffers: 32, recvBuffers: 64,
		memoryMB: 128, maxSessions: 8, ports: fmt.Sprintf("%d-%d", sinkPort, closedPort)})

	// The Ceph daemons' stand-ins, on the node's address in its namespace.
	var sinkLn, echoLn net.Listener
	if err := rig.node.Do(func() (err error) {
		// The address must exist before a listener can bind it: bind
		// the wildcard on the ports instead; the daemon adds the address.
		if sinkLn, err = net.Listen("tcp", fmt.Sprintf(":%d", sinkPort)); err != nil {
			return err
		}
		echoLn, err = net.Listen("tcp", fmt.Sprintf(":%d", echoPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sinkLn.Close()
	defer echoLn.Close()
	sunk := make(chan int64, 4)
	go func() {
		for {
			c, err := sinkLn.Accept()
			if err != nil {
				return
			}
			go func() { n, _ := io.Copy(io.Discard, c); c.Close(); sunk <- n }()
		}
	}()
	go func() {
		for {
			c, err := echoLn.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	rig.start(t, slog.New(slog.NewTextHandler(logWriter{t}, nil)), cm.Config{Timeout: 14, RetryCount: 7})
	d, stopDaemon, ep, mgr := rig.d, rig.stopDaemon, rig.ep, rig.mgr
	pd := ep.NewPD()
	sc := session.DefaultConfig()
	sc.BufferSize, sc.SendBuffers, sc.RecvBuffers = 128<<10, 32, 64
	poll := func() {
		now := time.Now()
		ep.Poll(now)
		mgr.Poll(now)
	}
	dial := func(port uint16) *bridgeClient {
		t.Helper()
		c := rig.dial(t, pd, sc, port)
		for end := time.Now().Add(10 * time.Second); !c.connected; poll() {
			if time.Now().After(end) {
				t.Fatalf("connect to %d: no answer", port)
			}
		}
		return c
	}

	// Nothing listens on closedPort: a REJ, at once.
	if c := dial(closedPort); !errors.Is(c.err, cm.ErrRejected) {
		t.Errorf("connect to a port without a daemon: %v; want a REJ", c.err)
	} else {
		c.release()
	}

	// A stream to the sink: the bridge's throughput.
	const streamBytes = 64 << 20
	c := dial(sinkPort)
	if c.err != nil {
		t.Fatal(c.err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	start := time.Now()
	sent := 0
	for sent < streamBytes {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("stream stalled at %d bytes", sent)
		}
		n, err := c.s.Send(chunk[:min(len(chunk), streamBytes-sent)])
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		sent += n
		poll()
	}
	for end := time.Now().Add(30 * time.Second); ; poll() {
		if left, err := c.s.Unacknowledged(); err != nil || left == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the stream was never acknowledged")
		}
	}
	if err := mgr.Disconnect(c.conn); err != nil {
		t.Fatal(err)
	}
	var got int64
	select {
	case got = <-sunk:
	case <-time.After(30 * time.Second):
		t.Fatal("the sink never saw the end of the stream")
	}
	bridgeSecs := time.Since(start).Seconds()
	for end := time.Now().Add(5 * time.Second); !c.down && time.Now().Before(end); poll() {
	}
	c.release()
	if got != streamBytes {
		t.Errorf("the sink got %d bytes of %d", got, streamBytes)
	}
	bridgeMBps := float64(streamBytes) / bridgeSecs / 1e6

	// An echo: both directions, intact.
	c = dial(echoPort)
	if c.err != nil {
		t.Fatal(c.err)
	}
	msg := make([]byte, 4<<20)
	for i := range msg {
		msg[i] = byte(i*13 + i>>9)
	}
	var back []byte
	buf := make([]byte, 256<<10)
	sent = 0
	for end := time.Now().Add(60 * time.Second); len(back) < len(msg); poll() {
		if time.Now().After(end) {
			t.Fatalf("echo stalled: %d sent, %d back", sent, len(back))
		}
		if sent < len(msg) {
			n, err := c.s.Send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			sent += n
		}
		n, err := c.s.Recv(buf)
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		back = append(back, buf[:n]...)
	}
	if string(back) != string(msg) {
		t.Error("the echo through the bridge differs")
	}
	// The bridged connection's session publishes its send buffers, read
	// here while the daemon polls: its cap of roce.send_buffers.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d.RoCE().Collectors()...)
	if v := metric(t, reg, "cephdpdkd_roce_send_buffers"); v != 32 {
		t.Errorf("cephdpdkd_roce_send_buffers sums to %v with one bridged connection, want its 32", v)
	}
	mgr.Disconnect(c.conn)
	for end := time.Now().Add(5 * time.Second); !c.down && time.Now().Before(end); poll() {
	}
	c.release()

	// The node's collectors export what the bridge did: the REJ for the
	// closed port, two connections bridged and ended, the bytes relayed.
	for end := time.Now().Add(5 * time.Second); metric(t, reg, "cephdpdkd_roce_bridge_connections") != 0; {
		if time.Now().After(end) {
			t.Fatal("bridged connections never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, label, value string
		want               func(float64) bool
		what               string
	}{
		{"cephdpdkd_roce_bridge_refused_total", "reason", "no_listener", func(v float64) bool { return v == 1 }, "1"},
		{"cephdpdkd_roce_bridge_refused_total", "reason", "max_sessions", func(v float64) bool { return v == 0 }, "0"},
		{"cephdpdkd_roce_bridge_accepted_total", "", "", func(v float64) bool { return v == 2 }, "2"},
		{"cephdpdkd_roce_bridge_closed_total", "", "", func(v float64) bool { return v == 2 }, "2"},
		{"cephdpdkd_roce_bridge_bytes_total", "direction", "to_tcp", func(v float64) bool { return v == streamBytes+float64(len(msg)) }, "the stream and the echo"},
		{"cephdpdkd_roce_bridge_bytes_total", "direction", "to_roce", func(v float64) bool { return v == float64(len(msg)) }, "the echo"},
		{"cephdpdkd_roce_bridge_errors_total", "side", "roce", func(v float64) bool { return v == 0 }, "0"},
	} {
		if v := labelled(t, reg, tc.name, tc.label, tc.value); !tc.want(v) {
			t.Errorf("%s{%s=%q} = %v, want %s", tc.name, tc.label, tc.value, v, tc.what)
		}
	}

	kernelMBps := testenv.KernelTCPThroughput(t, streamBytes)
	t.Logf("FIGURES bridge (RoCE over DPDK net_af_packet/veth → bridge → kernel TCP sink): %.1f MB/s; kernel TCP over veth between namespaces: %.1f MB/s; ratio %.2f",
		bridgeMBps, kernelMBps, bridgeMBps/kernelMBps)
	stopDaemon()
}

// labelled returns the value of the series of a family whose label has
// value want; with no label, the family's only series.
func labelled(t *testing.T, g prometheus.Gatherer, name, label, want string) float64 {
	t.Helper()
	for _, m := range gatherFamily(t, g, name).GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == want {
				return value(m)
			}
		}
		if label == "" {
			return value(m)
		}
	}
	t.Fatalf("no metric %s{%s=%q}", name, label, want)
	return 0
}
