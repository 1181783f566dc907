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
//     receive queues (srq.go) from which many QPs take their receives;
//     scatter-gather lists resolved to registered memory (scatter.go).
//   - The RC transport (requester.go, responder.go, and qp_io.go, where
//     the endpoint hands each QP its frames), as Linux rxe does
//     it: 24-bit PSNs, segmentation by path MTU with PadCnt, AckReq on
//     each message's last packet and every AckReqEvery packets, coalesced
//     ACKs, duplicate detection, sequence NAKs with go-back-N resuming
//     mid-message, a retransmit timer with retry count, RNR NAKs and RNR
//     back-off (or, for peers that allow no RNR NAK, a silent drop and
//     one sequence NAK once a receive is ready), reassembly into posted receive buffers only, RDMA WRITE
//     and READ with R_Key and bounds checks, flush-in-error completions.
//     Retransmissions are regenerated from the send work request and its
//     registered memory, so a QP holds no packet copies.
//   - Loss recovery on our side, beyond what rxe does (rtt.go,
//     reqTimers, queueNakSeq): an RTO from the measured RTT that resends
//     early while retries are still counted in whole transport timeouts,
//     and resends only the oldest packet until its answer tells a late
//     ACK (spurious: sending goes on where it was) from a loss, a
//     tail-loss probe, an ACK ahead of each sequence NAK so that a
//     Linux requester acts on it, and the NAK sent again when what it
//     asked for does not come and the requester never went back (a lost
//     NAK; nakTimer).
//   - Dead-peer detection on idle connections (idle.go): a QP that has
//     nothing in flight and has heard nothing from its peer for
//     EndpointConfig.IdleProbe sends a duplicate zero-length SEND, which
//     the peer's responder acknowledges and does not deliver; unanswered,
//     it goes again on the retransmit schedule, and the QP fails with
//     ErrRetryExceeded and ErrPeerDead as it would for a lost request.
//
// Ceph async+rdma's flow-controlled byte stream over a QP, alone or on a
// shared pool of buffers, is built on this API in roce/session; a QP's
// SRQ limit (SetSRQLimit, ReleaseSRQ) and an SRQ's lending reserve
// (SetLendingReserve) are there for such consumers.
//
// Packets come and go through PacketIO, a burst interface the daemon
// implements over its DPDK port and roce/memlink implements in memory.
// Endpoint.Poll, called from one goroutine, drives everything: there are
// no locks and no per-packet allocations on that path; time is passed in,
// so tests advance a clock instead of sleeping. What no QP consumes goes
// one way, up, to two dispatchers attached once (dispatcher.go, after
// gVisor's stack.NetworkDispatcher and TransportDispatcher): frames that
// are not RoCEv2 (ARP) and the senders' addresses to a
// NetworkDispatcher (roce/neigh), MADs for QP1 and asynchronous events
// to a TransportDispatcher (roce/cm). Neither polls the endpoint; the
// goroutine's owner polls each in turn.
//
// Copies. Each payload byte a session moves through the daemon
// (roce/session over internal/roced.RingIO and pmd) is copied, and read for
// the ICRC, this many times:
//
//	send: Session.Send: caller → registered send buffer      (1)
//	      requester: send buffer → frame (wire.BuildFrame)     (2) + ICRC read
//	      pmd.TxCopy: frame → packed scratch, one cgo crossing (3)
//	      cdd_tx_copy: scratch → mbuf                          (4)
//	recv: the frame is a view of the mbuf (no copy)               ICRC read
//	      responder: frame → posted receive buffer (scatter)   (1)
//	      Session.Recv: receive buffer → caller                (2)
//
// (The bridge adds the socket's own copies: TCP → chunk before (1) of
// send, chunk → TCP after (2) of recv.) Send's (1) stays: a
// retransmission is regenerated from the work request's registered
// memory, so the bytes must be there until acknowledged, not in the
// caller's slice. (2) is where the frame is built, and gather copies once
// more only when a packet spans SGEs (sessions post one SGE). (3) exists
// because cgo may not be given a [][]byte (Go memory holding Go
// pointers), so TxCopy packs the burst into one slice; (4) because frames
// are built in Go memory. Both would go if the link lent the endpoint its
// transmit mbufs (allocated in bulk, one crossing, frames built by (2)
// straight into their data room, lengths set at rte_eth_tx_burst, refused
// ones kept in order for the next round): an optional extension of
// PacketIO implemented by internal/roced.RingIO over new pmd calls (one segment
// per frame, as TxCopy already needs, which the configuration's data_room
// check ensures). That belongs with the dispatch, consumer and pmd
// packages and is not done here. On receive, (1) is the verbs contract
// (data lands in posted buffers; the mbuf is freed at the next burst) and
// (2) is Session's byte-stream API; a lending Recv would hold receive
// buffers, and with them the peer's credits, for as long as the consumer
// keeps the bytes.
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
