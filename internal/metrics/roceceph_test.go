package metrics

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
)

type fixedCephStats cephrdma.Stats

func (f fixedCephStats) Stats() cephrdma.Stats { return cephrdma.Stats(f) }

// A server and a client stack, as after roce/cephrdma's TestStats (one
// connection) with failures and closes added on the client.
func TestCephCollector(t *testing.T) {
	c := NewCephCollector(map[string]CephSource{
		"server": fixedCephStats{Accepted: 1, Established: 1, Active: 1},
		"client": fixedCephStats{Dialed: 1, Established: 1, Active: 1, Failed: 2, Closed: 3},
	})
	checkExposition(t, c, `
# HELP cephdpdkd_roce_ceph_connections_active Ceph async+rdma connections in the exchange or up.
# TYPE cephdpdkd_roce_ceph_connections_active gauge
cephdpdkd_roce_ceph_connections_active{stack="client"} 1
cephdpdkd_roce_ceph_connections_active{stack="server"} 1
# HELP cephdpdkd_roce_ceph_connections_total Ceph async+rdma connections by event: accepted (TCP), dialed, established, failed, closed.
# TYPE cephdpdkd_roce_ceph_connections_total counter
cephdpdkd_roce_ceph_connections_total{event="accepted",stack="client"} 0
cephdpdkd_roce_ceph_connections_total{event="accepted",stack="server"} 1
cephdpdkd_roce_ceph_connections_total{event="closed",stack="client"} 3
cephdpdkd_roce_ceph_connections_total{event="closed",stack="server"} 0
cephdpdkd_roce_ceph_connections_total{event="dialed",stack="client"} 1
cephdpdkd_roce_ceph_connections_total{event="dialed",stack="server"} 0
cephdpdkd_roce_ceph_connections_total{event="established",stack="client"} 1
cephdpdkd_roce_ceph_connections_total{event="established",stack="server"} 1
cephdpdkd_roce_ceph_connections_total{event="failed",stack="client"} 2
cephdpdkd_roce_ceph_connections_total{event="failed",stack="server"} 0
`)
}
