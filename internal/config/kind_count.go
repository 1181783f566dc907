package config

// countKind counts the packets and frees them. It runs local unless a
// poller lists its service.
type countKind struct {
	noTx
	noMbufs
}

func (countKind) Name() string           { return ConsumerCount }
func (countKind) Owned() bool            { return false }
func (countKind) Fixed() bool            { return false }
func (countKind) check(*validation, int) {}
