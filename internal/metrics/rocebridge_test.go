package metrics

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
)

// Every counter of a bridge, each with its own value, is exported under
// its name, help and labels. The label values of refusals, errors and
// stalls are the bridge's own: a new Bridge's Stats lists them all.
func TestBridgeCollector(t *testing.T) {
	s := new(bridge.Bridge).Stats()
	if len(s.Refused) != 5 || len(s.Errors) != 3 || len(s.Stalls) != 2 || len(s.Copied) != 2 || len(s.Syscalls) != 2 || len(s.Wakeups) != 2 {
		t.Fatalf("bridge reasons %v %v %v: update the exposition below", s.Refused, s.Errors, s.Stalls)
	}
	s.Active, s.Accepted, s.Closed, s.BytesToTCP, s.BytesToRoCE, s.DeadPeers = 1, 2, 3, 4, 5, 20
	s.Refused["no_listener"], s.Refused["dial_failed"], s.Refused["no_fds"] = 6, 7, 8
	s.Refused["max_sessions"], s.Refused["no_resources"] = 9, 10
	s.Errors["roce"], s.Errors["tcp_read"], s.Errors["tcp_write"] = 11, 12, 13
	s.Stalls["tcp_write"], s.Stalls["roce_send"] = 14, 15
	s.RecvBuffersFree, s.SendBuffersFree, s.RegisteredBytes, s.SendPoolEmpty = 16, 17, 18, 19
	s.Copied["to_tcp"], s.Copied["to_roce"] = 21, 22
	s.Syscalls["to_tcp"], s.Syscalls["to_roce"] = 23, 24
	s.Wakeups["to_tcp"], s.Wakeups["to_roce"] = 25, 26
	checkExposition(t, newBridgeCollector(func() bridge.Stats { return s }), `
# HELP cephdpdkd_roce_bridge_accepted_total RoCE connections accepted and bridged.
# TYPE cephdpdkd_roce_bridge_accepted_total counter
cephdpdkd_roce_bridge_accepted_total 2
# HELP cephdpdkd_roce_bridge_bytes_total Bytes relayed: to_tcp from the RoCE clients to the daemons, to_roce back.
# TYPE cephdpdkd_roce_bridge_bytes_total counter
cephdpdkd_roce_bridge_bytes_total{direction="to_roce"} 5
cephdpdkd_roce_bridge_bytes_total{direction="to_tcp"} 4
# HELP cephdpdkd_roce_bridge_closed_total Bridged connections that ended.
# TYPE cephdpdkd_roce_bridge_closed_total counter
cephdpdkd_roce_bridge_closed_total 3
# HELP cephdpdkd_roce_bridge_connections RoCE connections bridged to a Ceph daemon's TCP endpoint now.
# TYPE cephdpdkd_roce_bridge_connections gauge
cephdpdkd_roce_bridge_connections 1
# HELP cephdpdkd_roce_bridge_copied_bytes_total Bytes the bridge copied in user space between the registered buffers and the sockets, by direction: per byte relayed, the copies per byte.
# TYPE cephdpdkd_roce_bridge_copied_bytes_total counter
cephdpdkd_roce_bridge_copied_bytes_total{direction="to_roce"} 22
cephdpdkd_roce_bridge_copied_bytes_total{direction="to_tcp"} 21
# HELP cephdpdkd_roce_bridge_dead_peers_total Bridged connections reaped because the client stopped answering (its QP spent its retries on lost requests or idle probes): the daemon's TCP connection reset, the session freed.
# TYPE cephdpdkd_roce_bridge_dead_peers_total counter
cephdpdkd_roce_bridge_dead_peers_total 20
# HELP cephdpdkd_roce_bridge_errors_total Bridged connections that failed, by side.
# TYPE cephdpdkd_roce_bridge_errors_total counter
cephdpdkd_roce_bridge_errors_total{side="roce"} 11
cephdpdkd_roce_bridge_errors_total{side="tcp_read"} 12
cephdpdkd_roce_bridge_errors_total{side="tcp_write"} 13
# HELP cephdpdkd_roce_bridge_pool_free_buffers Shared registered buffers free: recv posted on the SRQ, send on the free list.
# TYPE cephdpdkd_roce_bridge_pool_free_buffers gauge
cephdpdkd_roce_bridge_pool_free_buffers{pool="recv"} 16
cephdpdkd_roce_bridge_pool_free_buffers{pool="send"} 17
# HELP cephdpdkd_roce_bridge_refused_total Connection requests rejected, by reason.
# TYPE cephdpdkd_roce_bridge_refused_total counter
cephdpdkd_roce_bridge_refused_total{reason="dial_failed"} 7
cephdpdkd_roce_bridge_refused_total{reason="max_sessions"} 9
cephdpdkd_roce_bridge_refused_total{reason="no_fds"} 8
cephdpdkd_roce_bridge_refused_total{reason="no_listener"} 6
cephdpdkd_roce_bridge_refused_total{reason="no_resources"} 10
# HELP cephdpdkd_roce_bridge_registered_bytes Registered memory of the shared buffer pools.
# TYPE cephdpdkd_roce_bridge_registered_bytes gauge
cephdpdkd_roce_bridge_registered_bytes 18
# HELP cephdpdkd_roce_bridge_send_pool_empty_total Sends that found the shared send pool empty (backpressure).
# TYPE cephdpdkd_roce_bridge_send_pool_empty_total counter
cephdpdkd_roce_bridge_send_pool_empty_total 19
# HELP cephdpdkd_roce_bridge_syscalls_total Socket system calls the bridge made (reads, writes, readiness probes), by direction.
# TYPE cephdpdkd_roce_bridge_syscalls_total counter
cephdpdkd_roce_bridge_syscalls_total{direction="to_roce"} 24
cephdpdkd_roce_bridge_syscalls_total{direction="to_tcp"} 23
# HELP cephdpdkd_roce_bridge_stalls_total Times one direction began waiting on the other side (backpressure).
# TYPE cephdpdkd_roce_bridge_stalls_total counter
cephdpdkd_roce_bridge_stalls_total{waiting_on="roce_send"} 15
cephdpdkd_roce_bridge_stalls_total{waiting_on="tcp_write"} 14
# HELP cephdpdkd_roce_bridge_wakeups_total Hand-offs between the bridge's poll loop and its socket goroutines that may wake one, by direction.
# TYPE cephdpdkd_roce_bridge_wakeups_total counter
cephdpdkd_roce_bridge_wakeups_total{direction="to_roce"} 26
cephdpdkd_roce_bridge_wakeups_total{direction="to_tcp"} 25
`)
}
