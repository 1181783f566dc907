package config

// kernelKind hands the packets to the kernel interface that the kernel
// section configures. The poll loop that owns the kernel services drains
// them all, highest priority first (KernelServices), and carries the
// kernel's frames out on kernel.tx_queue (validateKernel).
type kernelKind struct{ noTx }

func (kernelKind) Traits() Traits    { return Traits{Name: ConsumerKernel, Owned: true} }
func (kernelKind) Mbufs(*Config) int { return 0 }

func (kernelKind) check(v *validation, i int) {
	if v.c.Kernel == nil {
		v.bad(servicePath(i, "consumer.type"), "a %q consumer needs a kernel section", ConsumerKernel)
	}
}

// KernelServices returns the indexes of the services whose consumer is
// the kernel interface, highest priority first (file order among equals).
func (c *Config) KernelServices() []int {
	var out []int
	for i, s := range c.Services {
		if s.Consumer.Type == ConsumerKernel {
			out = append(out, i)
		}
	}
	// Stable insertion sort: a handful of services.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && c.Services[out[j]].Priority > c.Services[out[j-1]].Priority; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
