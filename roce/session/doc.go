// Package session runs Ceph async+rdma's flow-controlled byte stream
// over a reliable connected QP of package roce.
//
// A Session sends through registered send buffers: Send computes the
// free ones, reaps the send CQ when they hold less than the data, copies
// the data into one or more buffers and posts one SEND per buffer, and
// repeats. Recv copies received data out of the receive buffers and
// posts each one again once read out; a completion that is not a
// successful SEND on the session's QP within the buffer size fails the
// session with a CompletionError. A zero-length SEND closes the stream
// (Close, and io.EOF on the other side). Send and Recv never block: with
// nothing to do they return roce.ErrWouldBlock, and the endpoint's Poll
// moves the data.
//
// A session has buffers and CQs of its own (New, on a QP from NewQP), or,
// for many connections, shares a Pool's: receive buffers all posted on
// one SRQ and send buffers on one free list, registered once, with the
// completions of shared CQs dispatched by QP number. Flow control stays
// per session: a pool session holds at most its Config's SendBuffers and
// RecvBuffers of the pool's buffers (the latter kept with
// roce.QP.SetSRQLimit and ReleaseSRQ), and more receive buffers only
// while the pool lends them: while more than half of it is free
// (roce.SRQ.SetLendingReserve).
//
// Like the roce.Endpoint it runs on, a session or pool belongs to the
// goroutine that polls the endpoint. Only Session.Stats and a Registry,
// where sessions publish their send-buffer figures by endpoint and QP
// number, may be used from other goroutines: internal/metrics joins them
// with the endpoint's per-QP counters (cephdpdkd_roce_send_buffers,
// cephdpdkd_roce_send_buffers_in_use). Moving data allocates nothing.
//
// The package uses only roce's exported API.
package session
