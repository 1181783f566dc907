// Package ping is an rdma_cm client at the QP level: it connects to a
// listener, sends messages, checks what comes back and measures it. It is
// the active side behind `cephdpdkd roce-ping`, usable against the
// daemon's own echo service and against Linux tools in a guest:
//
//   - ModeEcho sends one message at a time and waits for the same bytes
//     back (the built-in echo service).
//   - ModeReply is ModeEcho without comparing content: rdma_server answers
//     with a buffer of its own.
//   - ModeTose sends Count messages of Size bytes and receives Count
//     messages of Size bytes, as ucmatose's server expects of a client.
//
// Like everything on a roce.Endpoint, a Client belongs to the goroutine
// that polls the endpoint; Result is handed to the done callback there.
package ping
