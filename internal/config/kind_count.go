package config

// countKind counts the packets and frees them. It runs local unless a
// poller lists its service.
type countKind struct{ noTx }

func (countKind) Traits() Traits         { return Traits{Name: ConsumerCount} }
func (countKind) Mbufs(*Config) int      { return 0 }
func (countKind) check(*validation, int) {}
