package metrics

import "github.com/prometheus/client_golang/prometheus"

// emitter sends the samples of one Collect call.
type emitter chan<- prometheus.Metric

func (e emitter) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
