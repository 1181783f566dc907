package config

// forwardKind transmits the packets out the port, on consumer.tx_queue
// (plus the lane, when local: LocalTxQueue).
type forwardKind struct {
	ownTx
	noMbufs
}

func (forwardKind) Name() string { return ConsumerForward }
func (forwardKind) Owned() bool  { return false }
func (forwardKind) Fixed() bool  { return false }

func (forwardKind) check(v *validation, i int) { v.checkTxQueue(i) }
