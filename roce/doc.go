// Package roce terminates RoCEv2 reliable connections in userspace, for
// a daemon whose NIC is bound to DPDK and so has no kernel verbs.
//
// It owns two layers:
//
//   - A verbs-shaped API (endpoint.go, memory.go, cq.go, qp.go): an
//     Endpoint per local MAC/IP address, protection domains, memory
//     regions registered over caller-supplied memory (an Allocator: DPDK
//     memory in the daemon, the Go heap in tests) with L_Key/R_Key,
//     completion queues with event and completion handlers, and reliable
//     connected QPs created, moved through RESET→INIT→RTR→RTS (and to
//     ERROR) with Modify, and fed with PostSend and PostRecv; shared
//     receive queues (srq.go) from which many QPs take their receives.
//   - The RC transport (requester.go, responder.go), as Linux rxe does
//     it: 24-bit PSNs, segmentation by path MTU with PadCnt, AckReq on
//     each message's last packet and every AckReqEvery packets, coalesced
//     ACKs, duplicate detection, sequence NAKs with go-back-N resuming
//     mid-message, a retransmit timer with retry count, RNR NAKs and RNR
//     back-off, reassembly into posted receive buffers only, RDMA WRITE
//     and READ with R_Key and bounds checks, flush-in-error completions.
//     Retransmissions are regenerated from the send work request and its
//     registered memory, so a QP holds no packet copies.
//
// Ceph async+rdma's flow-controlled byte stream over a QP, alone or on a
// shared pool of buffers, is built on this API in roce/session; a QP's
// SRQ limit (SetSRQLimit, ReleaseSRQ) is there for such consumers.
//
// Packets come and go through PacketIO, a burst interface the daemon
// implements over its DPDK port and roce/memlink implements in memory.
// Endpoint.Poll, called from one goroutine, drives everything: there are
// no locks and no per-packet allocations on that path; time is passed in,
// so tests advance a clock instead of sleeping. Frames for QP1 (the
// connection manager's MADs) go to a handler set with SetGSIHandler.
//
// Memory addresses that peers use for RDMA are synthetic: each memory
// region has its own base (MR.Addr), and a remote access is checked
// against the region its R_Key names before any byte moves. No pointer
// leaves the process and the package needs no unsafe.
//
// Endpoint.Stats, EachQPStats and QP.Stats snapshot the counters from any
// goroutine; internal/metrics exports them (cephdpdkd_roce_*).
//
// Wire formats come from roce/wire. Connection management (rdma_cm REQ/
// REP/RTU, the Ceph TCP exchange) is built on top of this package and
// does not live here.
package roce
