// Package mempool owns the daemon's mbuf pools: it sizes them from the
// configuration, refuses a pool too small to keep every queue and ring
// fed, reports how many mbufs are in use, and checks at shutdown that
// every mbuf came back.
//
// Pools live in hugepages, or in anonymous memory when the EAL runs with
// --no-huge. Package pmd makes the DPDK calls; this package is plain Go.
package mempool
