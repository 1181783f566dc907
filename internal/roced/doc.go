// Package roced runs RoCEv2 termination on the daemon's DPDK port: a
// roce.Endpoint fed by the RoCE service ring (UDP 4791 and ARP for the
// endpoint address) and transmitting on a port TX queue, the rdma_cm
// connection manager with ARP, the built-in services behind the
// configured listeners, and active clients (roce-ping).
//
// A Node is a dispatch.Consumer: the poll loop that owns the RoCE service
// calls Poll, and everything here runs on that loop's goroutine. Other
// goroutines reach it only through Ping, which queues work with the
// connection manager's Do.
package roced
