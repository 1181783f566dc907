// Package daemon assembles the data path from a validated configuration:
// EAL, mbuf pool, port, service rings, consumers and poll loops, in that
// order, and takes it apart in reverse on Stop, checking that every mbuf
// came back.
//
// Plan does the half that touches no DPDK state (rule compilation, pool
// sizing), so `cephdpdkd check-config` and the daemon agree on what a
// configuration means.
package daemon
