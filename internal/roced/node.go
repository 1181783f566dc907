package roced

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/neigh"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// maxRNRWait caps waits after a peer's RNR NAK: rdma_cm leaves Linux
// peers advertising 655 ms.
const maxRNRWait = 2 * time.Millisecond

// Config wires a Node to the data path.
type Config struct {
	RoCE    *config.RoCE
	Lanes   *dispatch.RingSet // the RoCE service's lanes
	Port    uint16
	TxQueue uint16
	Pool    *mempool.Pool // mbufs for transmitted frames
	PortMAC net.HardwareAddr
	Burst   int
	Log     *slog.Logger
	// Dial connects the bridge to the Ceph daemons (in the kernel
	// interface's namespace); needed with roce.bridge.
	Dial bridge.Dialer
	// Wake, when set, ends the idle sleep of the poll loop that polls
	// the node: the bridge calls it when its TCP side has work.
	Wake func()
	// Kernel, when set, resolves the endpoint's peers in place of its
	// own who-has (the af_xdp mode, where the kernel gets the replies).
	Kernel neigh.Kernel
	// MaxPathMTU is the largest path MTU a client may connect with: what
	// the port carries (config.Config.MaxRoCEPathMTU). 0: 4096.
	MaxPathMTU int
}

// Node is the RoCE termination of one port.
type Node struct {
	log      *slog.Logger
	io       *RingIO
	ep       *roce.Endpoint
	cm       *cm.Manager
	mem      *mempool.Memory
	services map[uint16]app.Server
	order    []app.Server
	clients  []*ping.Client
	// session is the configuration's session template: buffers, MTU,
	// timers.
	session session.Config
	// sessions holds the send-buffer figures of every session on the
	// endpoint, for the metrics.
	sessions session.Registry

	bridge    *bridge.Bridge
	ceph      *cephrdma.Stack
	cephSvcs  []app.SessionService
	listeners []net.Listener
	serving   sync.WaitGroup
}

var _ dispatch.Consumer = (*Node)(nil)

// New builds the endpoint, the connection manager and the listeners.
func New(cfg Config) (_ *Node, err error) {
	r := cfg.RoCE
	var mac [6]byte
	if r.MAC != "" {
		hw, err := net.ParseMAC(r.MAC)
		if err != nil {
			return nil, fmt.Errorf("roced: mac %q: %w", r.MAC, err)
		}
		copy(mac[:], hw)
	} else {
		copy(mac[:], cfg.PortMAC)
	}
	n := &Node{log: cfg.Log, services: map[uint16]app.Server{}}
	if n.log == nil {
		n.log = slog.Default()
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if n.io, err = NewRingIO(cfg.Lanes, cfg.Port, cfg.TxQueue, cfg.Pool, cfg.Burst); err != nil {
		return nil, err
	}
	n.mem = mempool.NewMemory("cdd_roce", r.MemoryMB<<20)
	n.session = session.DefaultConfig()
	n.session.BufferSize, n.session.SendBuffers, n.session.RecvBuffers = r.BufferSize, r.SendBuffers, r.RecvBuffers
	n.session.Allocator = n.mem
	n.session.MinRNRTimer = r.RNRTimer
	n.session.PathMTU = r.MTU
	n.session.Registry = &n.sessions
	n.ep, err = roce.NewEndpoint(roce.EndpointConfig{
		MAC: mac, IP: r.Address.Addr(), IO: n.io, RxBurst: cfg.Burst, TxBurst: cfg.Burst, MaxRNRWait: maxRNRWait,
		MaxUnackedPSNs: r.Window,
		// Idle QPs check their peers: a client gone without a DREQ
		// frees its session (and the bridge's TCP connection) within
		// idle_probe + timeout × (retry+1), not ms_tcp_read_timeout.
		IdleProbe: r.IdleProbeInterval(),
	})
	if err != nil {
		return nil, fmt.Errorf("roced: endpoint: %w", err)
	}
	// The MAD retransmission interval and the largest path MTU a REQ
	// may ask for are the Manager's defaults.
	var nt *neigh.Table
	if cfg.Kernel != nil {
		nt, err = neigh.New(neigh.Config{MAC: mac, IP: r.Address.Addr(), Send: n.ep.SendFrame, Kernel: cfg.Kernel})
		if err != nil {
			return nil, fmt.Errorf("roced: neighbours: %w", err)
		}
	}
	n.cm, err = cm.New(n.ep, cm.Config{
		PathMTU: r.MTU, MaxPathMTU: cfg.MaxPathMTU, MinRNRTimer: r.RNRTimer, Timeout: r.Timeout,
		RetryCount: r.RetryCount, RNRRetry: r.RNRRetry, MaxConns: 4 * r.MaxSessions,
		MaxRetries: cm.LANMaxRetries,
		Neigh:      nt,
		Log:        n.log,
	})
	if err != nil {
		return nil, fmt.Errorf("roced: connection manager: %w", err)
	}
	for _, l := range r.Listen {
		svc, err := n.newService(r, l)
		if err != nil {
			return nil, fmt.Errorf("roced: listener %d (%s): %w", l.Port, l.App, err)
		}
		if err := app.Listen(n.cm, l.Port, svc); err != nil {
			return nil, fmt.Errorf("roced: listen on %d: %w", l.Port, err)
		}
		n.services[l.Port] = svc
		n.order = append(n.order, svc)
		n.log.Info("RoCE listener", "addr", r.Address.Addr(), "port", l.Port, "app", l.App)
	}
	if len(r.CephTCP) > 0 {
		if err := n.startCeph(r); err != nil {
			return nil, err
		}
	}
	if r.Bridge != nil {
		if err := n.startBridge(r, cfg.Dial, cfg.Wake); err != nil {
			return nil, err
		}
	}
	n.log.Info("RoCE endpoint up", "addr", r.Address.Addr(), "mac", net.HardwareAddr(mac[:]).String(), "mtu", r.MTU)
	return n, nil
}

func (n *Node) newService(r *config.RoCE, l config.RoCEListener) (app.Server, error) {
	stall := app.DefaultStallTimeout
	switch l.App {
	case config.AppEcho, config.AppDiscard:
		return app.NewRawEcho(n.ep, app.RawConfig{
			MessageSize: r.BufferSize, Depth: r.RecvBuffers, Discard: l.App == config.AppDiscard,
			Allocator: n.mem, MaxConns: r.MaxSessions, StallTimeout: stall,
		})
	case config.AppRPing:
		return app.NewRPingServer(n.ep, app.RPingConfig{MaxSize: r.BufferSize, Allocator: n.mem, MaxConns: r.MaxSessions, StallTimeout: stall})
	case config.AppTose:
		return app.NewCMATose(n.ep, app.CMAToseConfig{Count: l.Count, Size: l.Size, Allocator: n.mem, MaxConns: r.MaxSessions, StallTimeout: stall})
	}
	return nil, fmt.Errorf("unknown app %q", l.App)
}

// startCeph serves Ceph async+rdma's QP record exchange on each
// configured TCP address; the sessions it sets up go to the listener's
// built-in service.
func (n *Node) startCeph(r *config.RoCE) error {
	cfg := cephrdma.DefaultConfig()
	cfg.Resolver = n.cm
	cfg.MaxConns = r.MaxSessions
	cfg.Session.BufferSize = r.BufferSize
	cfg.Session.SendBuffers, cfg.Session.RecvBuffers = r.SendBuffers, r.RecvBuffers
	cfg.Session.Allocator = n.mem
	cfg.Session.Registry = &n.sessions
	cfg.Session.MinRNRTimer = r.RNRTimer
	// Ceph asks for unlimited retries; a vanished peer must still free
	// its QP, buffers and mbufs.
	cfg.Session.RetryCount = min(r.RetryCount, cm.DefaultMaxRetryCount)
	cfg.OnError = func(peer netip.AddrPort, err error) {
		n.log.Warn("Ceph async+rdma connection failed", "peer", peer, "err", err)
	}
	var err error
	if n.ceph, err = cephrdma.New(n.ep, cfg); err != nil {
		return fmt.Errorf("roced: ceph stack: %w", err)
	}
	for _, l := range r.CephTCP {
		ln, err := net.Listen("tcp", l.Listen)
		if err != nil {
			return fmt.Errorf("roced: ceph_tcp listen on %s: %w", l.Listen, err)
		}
		ec := app.EchoConfig{BufferSize: r.BufferSize}
		var svc app.SessionService = app.NewEcho(ec)
		if l.App == config.AppDiscard {
			svc = app.NewDiscard(ec)
		}
		n.listeners = append(n.listeners, ln)
		n.cephSvcs = append(n.cephSvcs, svc)
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.ceph.Serve(ln, svc); err != nil && !errors.Is(err, cephrdma.ErrClosed) && !errors.Is(err, net.ErrClosed) {
				n.log.Error("Ceph async+rdma listener", "addr", ln.Addr(), "err", err)
			}
		}()
		n.log.Info("Ceph async+rdma listener", "tcp", ln.Addr().String(), "app", l.App)
	}
	return nil
}

// startBridge relays rdma_cm connections to the bridged ports to the
// Ceph daemons' TCP endpoints at the same address.
func (n *Node) startBridge(r *config.RoCE, dial bridge.Dialer, wake func()) error {
	if dial == nil {
		return errors.New("roced: roce.bridge without a dialer")
	}
	var err error
	n.bridge, err = bridge.New(n.cm, bridge.Config{
		Session: n.session, Dial: dial, MaxConns: r.MaxSessions, Chunks: r.Bridge.Chunks, Log: n.log,
		RecvPool: r.Bridge.RecvPool, SendPool: r.Bridge.SendPool, Wake: wake,
	})
	if err != nil {
		return fmt.Errorf("roced: bridge: %w", err)
	}
	ports := r.Bridge.BridgePorts()
	for _, p := range ports {
		if err := n.bridge.Listen(p); err != nil {
			return fmt.Errorf("roced: bridge listen on %d: %w", p, err)
		}
	}
	n.log.Info("RoCE⇄TCP bridge", "addr", r.Address.Addr(), "ports", r.Bridge.Ports, "count", len(ports),
		"chunks", r.Bridge.Chunks, "buffer_size", r.BufferSize)
	return nil
}

// Poll runs one round of the node. The order is written here and nowhere
// else; each layer only hands traffic up to the next, never polls the one
// below:
//
//  1. The endpoint: transmit what the link refused last round, read a
//     burst and dispatch it (RoCE to the QPs, MADs and QP events to the
//     connection manager, ARP and senders' addresses to the neighbour
//     table), run the QP timers, transmit, run the completion handlers
//     (the sessions').
//  2. The connection manager: the commands queued with Do (Ping,
//     Status), the MADs and events step 1 handed it, the neighbour
//     table's answers and probes, the connections' timers.
//  3. What runs over connections: the bridge, the built-in services,
//     the Ceph exchange and its services, the roce-ping clients. What
//     they post goes out in the next round's step 1.
func (n *Node) Poll() int {
	now := time.Now()
	w := n.ep.Poll(now)
	w += n.cm.Poll(now)
	if n.bridge != nil {
		w += n.bridge.Poll(now)
	}
	for _, s := range n.order {
		w += s.Poll(now)
	}
	if n.ceph != nil {
		w += n.ceph.Poll(now)
		for _, s := range n.cephSvcs {
			w += s.Poll(now)
		}
	}
	if len(n.clients) > 0 {
		live := n.clients[:0]
		for _, c := range n.clients {
			w += c.Poll(now)
			if !c.Done() {
				live = append(live, c)
			}
		}
		clear(n.clients[len(live):])
		n.clients = live
	}
	return w
}

// ErrBusy is returned by Ping when the poll loop does not take the
// request.
var ErrBusy = errors.New("roced: poll loop busy")

// Ping starts a roce-ping client from any goroutine; done receives its
// result on the poll loop's goroutine.
func (n *Node) Ping(raddr netip.Addr, port uint16, cfg ping.Config, done func(ping.Result)) error {
	if cfg.Allocator == nil {
		cfg.Allocator = n.mem
	}
	if cfg.Mode == ping.ModeStream {
		cfg.Session = n.session
	}
	return n.cm.Do(func() {
		c, err := ping.Start(n.cm, raddr, port, cfg, time.Now(), done)
		if err != nil {
			done(ping.Result{Err: err})
			return
		}
		n.clients = append(n.clients, c)
	})
}

// Status is a consistent view of the node, taken on the poll goroutine.
type Status struct {
	Conns       int // connections the manager holds, time-wait included
	QPs         int // QPs on the endpoint
	MemoryInUse int // bytes of DPDK memory in registered buffers
	Services    map[uint16]app.Stats
	Neighbours  int
	Pings       int // roce-ping clients not yet disconnected and freed
}

// Status asks the poll loop for the node's status and waits for it.
func (n *Node) Status(ctx context.Context) (Status, error) {
	ch := make(chan Status, 1)
	if err := n.cm.Do(func() { ch <- n.status() }); err != nil {
		return Status{}, err
	}
	select {
	case st := <-ch:
		return st, nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

func (n *Node) status() Status {
	st := Status{Conns: n.cm.NumConns(), QPs: n.ep.NumQPs(), MemoryInUse: n.mem.InUse(),
		Services: map[uint16]app.Stats{}, Neighbours: n.cm.Neigh().Len(), Pings: len(n.clients)}
	for port, s := range n.services {
		st.Services[port] = s.Stats()
	}
	return st
}

// Collectors export the endpoint's per-QP metrics (cephdpdkd_roce_*, with
// the send buffers of the sessions on the QPs), the
// connection manager's (cephdpdkd_roce_cm_*), the frames the TX queue
// refused (cephdpdkd_roce_endpoint_tx_refused_total), the built-in
// services' (cephdpdkd_roce_app_*), the Ceph exchange's
// (cephdpdkd_roce_ceph_*) and the bridge's (cephdpdkd_roce_bridge_*).
// They read only snapshots, so they may be collected from any goroutine.
func (n *Node) Collectors() []prometheus.Collector {
	srcs := map[string]metrics.AppSource{}
	for port, s := range n.services {
		srcs[strconv.Itoa(int(port))] = s
	}
	for i, s := range n.cephSvcs {
		srcs["ceph_tcp_"+strconv.Itoa(i)] = s
	}
	cs := []prometheus.Collector{
		metrics.NewRoCECollector(&n.sessions, n.ep), metrics.NewCMCollector(n.cm),
		metrics.NewTxRefusedCollector(n.ep.IP().String(), &n.io.TxRefused),
		metrics.NewAppCollector(srcs),
	}
	if n.ceph != nil {
		cs = append(cs, metrics.NewCephCollector(map[string]metrics.CephSource{"ceph": n.ceph}))
	}
	if n.bridge != nil {
		cs = append(cs, metrics.NewBridgeCollector(n.bridge))
	}
	return cs
}

// Counts returns the frames the node took from its ring and transmitted.
func (n *Node) Counts() *consumer.Counts { return &n.io.Counts }

// Close shuts the services down, freeing their QPs and buffers, then the
// endpoint's frame I/O. The poll loop must have stopped.
func (n *Node) Close() {
	for _, ln := range n.listeners {
		ln.Close()
	}
	n.listeners = nil
	if n.ceph != nil {
		if err := n.ceph.Close(); err != nil {
			n.log.Warn("Ceph async+rdma shutdown", "err", err)
		}
		n.serving.Wait()
		n.ceph = nil
	}
	for _, s := range n.order {
		if err := s.Shutdown(); err != nil {
			n.log.Warn("RoCE service shutdown", "err", err)
		}
	}
	if n.bridge != nil {
		if err := n.bridge.Shutdown(); err != nil {
			n.log.Warn("RoCE bridge shutdown", "err", err)
		}
		n.bridge = nil
	}
	n.order = nil
	if n.mem != nil {
		if left := n.mem.Close(); left > 0 {
			n.log.Warn("RoCE buffers still registered at shutdown", "bytes", left)
		}
		n.mem = nil
	}
	if n.io != nil {
		n.io.Close()
		n.io = nil
	}
}
