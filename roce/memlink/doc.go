// Package memlink is an in-memory Ethernet link between two packet I/O
// ends, for testing the RoCE endpoint without a NIC. Each direction is a
// bounded frame queue; frames sent into it can be dropped, reordered,
// duplicated or corrupted with configured probabilities drawn from a
// seeded generator, so a failing run can be replayed.
//
// An End implements roce.PacketIO (RecvBurst/SendBurst). The link owns
// every frame buffer it ever hands out: after warm-up it allocates
// nothing. Ends may be driven from different goroutines; each direction
// is guarded by its own mutex.
package memlink
