package metrics

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Status is the part of a scrape the operator's status line shows.
type Status struct {
	At        time.Time
	RxPackets uint64
	TxPackets uint64 // the port's, driver count
	Services  map[string]ServiceStatus
	Malformed uint64
	InUse     int
	PoolSize  int
	BusyRatio float64
}

// ServiceStatus is one service's counters in a Status.
type ServiceStatus struct {
	Packets, Drops uint64
	Ring           int
}

// StatusFromFamilies extracts a Status from gathered or scraped metrics.
func StatusFromFamilies(at time.Time, fams []*dto.MetricFamily) Status {
	st := Status{At: at, Services: map[string]ServiceStatus{}}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	value := func(m *dto.Metric) float64 {
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := value(m)
			switch f.GetName() {
			case "cephdpdkd_queue_rx_packets_total":
				st.RxPackets += uint64(v)
			case "cephdpdkd_port_tx_packets_total":
				st.TxPackets += uint64(v)
			case "cephdpdkd_service_packets_total":
				s := st.Services[label(m, "service")]
				s.Packets = uint64(v)
				st.Services[label(m, "service")] = s
			case "cephdpdkd_service_drops_total":
				s := st.Services[label(m, "service")]
				s.Drops = uint64(v)
				st.Services[label(m, "service")] = s
			case "cephdpdkd_service_ring_occupancy":
				s := st.Services[label(m, "service")]
				s.Ring = int(v)
				st.Services[label(m, "service")] = s
			case "cephdpdkd_malformed_frames_total":
				st.Malformed += uint64(v)
			case "cephdpdkd_mempool_in_use_mbufs":
				st.InUse += int(v)
			case "cephdpdkd_mempool_mbufs":
				st.PoolSize += int(v)
			case "cephdpdkd_poller_busy_ratio":
				st.BusyRatio = max(st.BusyRatio, v)
			}
		}
	}
	return st
}

// Scrape fetches and parses a daemon's /metrics.
func Scrape(client *http.Client, url string) (Status, error) {
	resp, err := client.Get(url)
	if err != nil {
		return Status{}, fmt.Errorf("metrics: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Status{}, fmt.Errorf("metrics: scrape %s: %s", url, resp.Status)
	}
	fams, err := parseText(resp.Body)
	if err != nil {
		return Status{}, fmt.Errorf("metrics: parse %s: %w", url, err)
	}
	return StatusFromFamilies(time.Now(), fams), nil
}

func parseText(r io.Reader) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	return out, nil
}

// FormatStatus renders one status line from two samples: packets per
// second per service, drops since the previous sample, malformed frames,
// pool use and poll-loop busy ratio.
func FormatStatus(prev, cur Status) string {
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		dt = 1
	}
	rate := func(a, b uint64) string { return humanRate(float64(b-min(a, b)) / dt) }
	names := make([]string, 0, len(cur.Services))
	for n := range cur.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "rx %s tx %s", rate(prev.RxPackets, cur.RxPackets), rate(prev.TxPackets, cur.TxPackets))
	for _, n := range names {
		c, p := cur.Services[n], prev.Services[n]
		fmt.Fprintf(&b, " | %s %s", n, rate(p.Packets, c.Packets))
		if d := c.Drops - min(p.Drops, c.Drops); d > 0 {
			fmt.Fprintf(&b, " drop %d", d)
		}
	}
	fmt.Fprintf(&b, " | malformed %d | mbufs %d/%d | busy %.0f%%", cur.Malformed, cur.InUse, cur.PoolSize, cur.BusyRatio*100)
	return b.String()
}

func humanRate(pps float64) string {
	switch {
	case pps >= 1e6:
		return fmt.Sprintf("%.2f Mpps", pps/1e6)
	case pps >= 1e3:
		return fmt.Sprintf("%.1f kpps", pps/1e3)
	}
	return fmt.Sprintf("%.0f pps", pps)
}
