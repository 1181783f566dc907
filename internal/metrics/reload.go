package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Reloads counts configuration reloads by result and labels the
// configuration running now with its hash, so that a scrape shows
// whether a node runs the file it should (sha256sum of the file).
type Reloads struct {
	mu     sync.Mutex
	ok     uint64
	failed uint64
	hash   string

	total, info *prometheus.Desc
}

// NewReloads starts with the configuration of hash running.
func NewReloads(hash string) *Reloads {
	return &Reloads{
		hash:  hash,
		total: prometheus.NewDesc("cephdpdkd_config_reloads_total", "Configuration reloads (SIGHUP), by result: ok, or error (refused; the previous configuration kept running).", []string{"result"}, nil),
		info:  prometheus.NewDesc("cephdpdkd_config_info", "The running configuration, by the SHA-256 of its file (1).", []string{"hash"}, nil),
	}
}

// Loaded records a reload that now runs the configuration of hash.
func (r *Reloads) Loaded(hash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ok++
	r.hash = hash
}

// Failed records a reload that was refused.
func (r *Reloads) Failed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
}

// Describe implements prometheus.Collector.
func (r *Reloads) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.total
	ch <- r.info
}

// Collect implements prometheus.Collector.
func (r *Reloads) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	ok, failed, hash := r.ok, r.failed, r.hash
	r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(r.total, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(r.total, prometheus.CounterValue, float64(failed), "error")
	ch <- prometheus.MustNewConstMetric(r.info, prometheus.GaugeValue, 1, hash)
}
