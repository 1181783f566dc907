package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

func TestXDPCollector(t *testing.T) {
	var s xdp.Stats
	s[xdp.Redirected], s[xdp.PassNotIPv4], s[xdp.PassNoSocket] = 7, 3, 2
	c := NewXDPCollector("ens1f0", func() (xdp.Stats, error) { return s, nil })
	want := `
# HELP cephdpdkd_xdp_redirected_total Frames the XDP program redirected to the daemon's AF_XDP sockets (RoCEv2 to the RoCE address).
# TYPE cephdpdkd_xdp_redirected_total counter
cephdpdkd_xdp_redirected_total{interface="ens1f0"} 7
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "cephdpdkd_xdp_redirected_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "cephdpdkd_xdp_passed_total"); n != int(xdp.NumReasons)-1 {
		t.Errorf("%d passed_total series, want one per pass reason (%d)", n, xdp.NumReasons-1)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if got["not_ipv4"] != 3 || got["no_socket"] != 2 || got["other_address"] != 0 {
		t.Errorf("passed_total by reason = %v", got)
	}
}

func TestXDPCollectorReadError(t *testing.T) {
	c := NewXDPCollector("ens1f0", func() (xdp.Stats, error) { return xdp.Stats{}, errors.New("map gone") })
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "map gone") {
		t.Fatalf("Gather = %v, want the read error", err)
	}
}
