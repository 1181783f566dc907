package config

// roceKind is the userspace RoCEv2 endpoint that the roce section
// configures: one poll loop drains its service, and it transmits on
// roce.tx_queue.
type roceKind struct{}

func (roceKind) Traits() Traits    { return Traits{Name: ConsumerRoCE, Owned: true} }
func (roceKind) Mbufs(*Config) int { return 0 }

func (roceKind) TxQueue(c *Config, s Service) (int, bool) {
	if c.RoCE != nil && c.RoCE.Service == s.Name {
		return c.RoCE.TxQueue, true
	}
	return 0, false
}

// check requires the roce section to name the service; validateRoCE
// checks the section itself.
func (roceKind) check(v *validation, i int) {
	s := v.c.Services[i]
	if v.c.RoCE == nil || v.c.RoCE.Service != s.Name {
		v.bad(servicePath(i, "consumer.type"), "a %q consumer needs a roce section with service: %s", ConsumerRoCE, s.Name)
	}
}
