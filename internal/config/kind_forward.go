package config

// forwardKind transmits the packets out the port on consumer.tx_queue,
// plus the lane when local (LocalTxQueue), which must exist.
type forwardKind struct{ ownTx }

func (forwardKind) Traits() Traits             { return Traits{Name: ConsumerForward} }
func (forwardKind) Mbufs(*Config) int          { return 0 }
func (forwardKind) check(v *validation, i int) { v.checkTxQueue(i) }
