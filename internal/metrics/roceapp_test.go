package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cephdpdkd/cephdpdkd/roce/app"
)

type fixedAppStats app.Stats

func (f fixedAppStats) Stats() app.Stats { return app.Stats(f) }

// gather registers c and returns metric name → label values → value.
func gather(t *testing.T, c prometheus.Collector) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]map[string]float64)
	for _, f := range families {
		m := make(map[string]float64)
		for _, x := range f.Metric {
			key := ""
			for _, l := range x.Label {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			m[key] = value(x)
		}
		out[f.GetName()] = m
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func TestAppCollector(t *testing.T) {
	got := gather(t, NewAppCollector(map[string]AppSource{
		"rping:7174": fixedAppStats{Accepted: 3, Active: 1, Completed: 1, Failed: 1, MessagesIn: 20, MessagesOut: 21,
			BytesIn: 320, BytesOut: 336, RDMAReads: 10, RDMAWrites: 9, RDMABytes: 1216},
		"echo:7471": fixedAppStats{Accepted: 1},
	}))
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{"cephdpdkd_roce_app_connections_total", "event=accepted,service=rping:7174,", 3},
		{"cephdpdkd_roce_app_connections_total", "event=failed,service=rping:7174,", 1},
		{"cephdpdkd_roce_app_connections_total", "event=accepted,service=echo:7471,", 1},
		{"cephdpdkd_roce_app_connections_active", "service=rping:7174,", 1},
		{"cephdpdkd_roce_app_messages_total", "direction=out,service=rping:7174,", 21},
		{"cephdpdkd_roce_app_bytes_total", "direction=in,service=rping:7174,", 320},
		{"cephdpdkd_roce_app_rdma_ops_total", "op=write,service=rping:7174,", 9},
		{"cephdpdkd_roce_app_rdma_bytes_total", "service=rping:7174,", 1216},
	} {
		if v, ok := got[tc.name][tc.labels]; !ok || v != tc.want {
			t.Errorf("%s{%s} = %v (found %v), want %v", tc.name, tc.labels, v, ok, tc.want)
		}
	}
}
