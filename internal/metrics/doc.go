// Package metrics exports the daemon's counters to Prometheus and renders
// the operator's status line.
//
// The data path keeps its own atomic counters; this package reads them
// only when scraped, through a Snapshot function, so scraping never
// touches a poll loop. Every metric is named cephdpdkd_* and labelled by
// port, queue, service, pool, reason or lcore.
package metrics
