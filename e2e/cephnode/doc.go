// Package cephnode is the end-to-end test of a Ceph node behind
// cephdpdkd: a real ceph-mon and memstore ceph-osd listen on the daemon's
// kernel exception-path interface in a "node" network namespace, and real
// ceph and rados clients reach them from a "client" namespace through the
// daemon's DPDK port (net_af_packet on a veth pair). The daemon runs as
// its own process, as an operator runs it.
package cephnode
