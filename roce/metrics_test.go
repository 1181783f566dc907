package roce

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestCollector(t *testing.T) {
	cfg := smallSessionConfig()
	sp := newSessionPair(t, testLink(0), EndpointConfig{}, cfg)
	msg := make([]byte, cfg.BufferSize*2)
	sp.a.Send(msg)
	sp.n.poll() // sent, not yet acknowledged or reaped
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(sp.n.a, sp.n.b)); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
		metrics:
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
						continue metrics
					}
				}
				return metricValue(m), true
			}
		}
		return 0, false
	}
	qpa := strconv.Itoa(int(sp.a.QP().QPN()))
	stats := sp.a.QP().Stats()
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cephdpdkd_roce_packets_total", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa, "direction": "tx"}, float64(stats.TxPackets)},
		{"cephdpdkd_roce_bytes_total", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa, "direction": "tx"}, float64(stats.TxBytes)},
		{"cephdpdkd_roce_send_buffers_in_use", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa}, 2},
		{"cephdpdkd_roce_send_buffers", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa}, 4},
		{"cephdpdkd_roce_qp_state", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa}, float64(QPStateRTS)},
		{"cephdpdkd_roce_naks_total", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa, "direction": "sent", "code": "remote_access"}, 0},
		{"cephdpdkd_roce_cq_depth", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa, "queue": "send"}, 0},
		{"cephdpdkd_roce_endpoint_frames_total", map[string]string{"endpoint": "10.0.0.1", "direction": "tx"}, float64(sp.n.a.Stats().TxFrames)},
	} {
		got, ok := value(tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if stats.TxPackets == 0 {
		t.Error("nothing sent")
	}
	// A destroyed QP disappears from the metrics.
	sp.a.QP().Destroy()
	families, _ = reg.Gather()
	if _, ok := value("cephdpdkd_roce_qp_state", map[string]string{"endpoint": "10.0.0.1", "qpn": qpa}); ok {
		t.Error("destroyed qp still exported")
	}
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

// TestCollectConcurrently gathers metrics on another goroutine while the
// endpoints move data and QPs come and go (run with -race).
func TestCollectConcurrently(t *testing.T) {
	sp := newSessionPair(t, testLink(0.01), EndpointConfig{}, smallSessionConfig())
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(sp.n.a, sp.n.b))
	stop := make(chan struct{})
	done := make(chan int)
	started := make(chan struct{})
	first := sp.a.QP()
	go func() {
		gathers := 0
		for {
			if gathers == 1 {
				close(started)
			}
			select {
			case <-stop:
				done <- gathers
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
			first.Stats()
			gathers++
		}
	}()
	var ev []Event
	// The gatherer must be running while the sessions work: on a loaded
	// machine it may not have been scheduled yet.
	<-started
	for i := range 20 {
		qp, _ := sp.n.newQP(sp.n.pa, defaultQPOpts(), &ev)
		res := sp.stream(t, 50_000, uint64(i), 7000, 9000)
		if res.sendHash != res.recvHash {
			t.Fatal("stream differs")
		}
		qp.Destroy()
		sp = restartSessions(t, sp)
	}
	close(stop)
	if g := <-done; g == 0 {
		t.Error("collector never ran")
	}
}

// restartSessions replaces the closed sessions of sp with new ones on the
// same endpoints.
func restartSessions(t *testing.T, sp *sessionPair) *sessionPair {
	t.Helper()
	for _, s := range []*Session{sp.a, sp.b} {
		s.QP().Modify(&QPAttr{State: QPStateError}, QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		s.QP().Destroy()
	}
	next := &sessionPair{n: sp.n, allocA: sp.allocA, allocB: sp.allocB}
	cfg := smallSessionConfig()
	cfg.Allocator = sp.allocA
	qa, err := NewSessionQP(sp.n.pa, cfg)
	if err != nil {
		t.Fatal(err)
	}
	next.a, _ = NewSession(qa, cfg)
	cfg.Allocator = sp.allocB
	qb, err := NewSessionQP(sp.n.pb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	next.b, _ = NewSession(qb, cfg)
	for _, m := range []struct {
		qp   *QP
		attr func() (*QPAttr, QPAttrMask)
	}{
		{qa, func() (*QPAttr, QPAttrMask) { return cfg.RTRAttr(AddressVector{DstMAC: macB, DstIP: ipB}, qb.QPN(), 7) }},
		{qb, func() (*QPAttr, QPAttrMask) { return cfg.RTRAttr(AddressVector{DstMAC: macA, DstIP: ipA}, qa.QPN(), 9) }},
		{qa, func() (*QPAttr, QPAttrMask) { return cfg.RTSAttr(9) }},
		{qb, func() (*QPAttr, QPAttrMask) { return cfg.RTSAttr(7) }},
	} {
		if err := m.qp.Modify(m.attr()); err != nil {
			t.Fatal(err)
		}
	}
	return next
}
