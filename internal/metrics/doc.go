// Package metrics exports the daemon's counters to Prometheus and renders
// the operator's status line.
//
// The data path keeps its own atomic counters; this package reads them
// only when scraped, through snapshots, so scraping never touches a poll
// loop: the daemon's Snapshot function for ports, queues, services, pools
// and the kernel path (Collector), and the RoCE packages' own race-safe
// snapshots for the RoCE endpoint and its QPs (RoCECollector, from
// roce.Endpoint.Stats and EachQPStats, joined by endpoint and QP number
// with the send buffers of the sessions on them from a
// session.Registry), the connection manager
// (CMCollector), the built-in services (AppCollector), the Ceph exchange
// (CephCollector) and the bridge (BridgeCollector). The roce packages
// themselves know nothing of Prometheus. Every metric is named
// cephdpdkd_* and labelled by port, queue, service, pool, reason, lcore,
// or for RoCE endpoint and QP number.
package metrics
