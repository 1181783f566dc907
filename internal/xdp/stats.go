package xdp

import "fmt"

// Reason is what the program did with a frame: Redirected, or why it
// passed it to the kernel. The values are bpf/xdp_roce.c's enum reason.
type Reason int

const (
	Redirected Reason = iota
	PassNotIPv4
	PassNotRoCE
	PassOtherAddress
	PassFragment
	PassMalformed
	PassNoSocket
	PassUnconfigured
	NumReasons
)

var reasonNames = [NumReasons]string{
	Redirected:       "redirected",
	PassNotIPv4:      "not_ipv4",
	PassNotRoCE:      "not_roce",
	PassOtherAddress: "other_address",
	PassFragment:     "fragment",
	PassMalformed:    "malformed",
	PassNoSocket:     "no_socket",
	PassUnconfigured: "unconfigured",
}

func (r Reason) String() string {
	if r >= 0 && r < NumReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Stats are the program's frame counts by reason, summed over CPUs.
type Stats [NumReasons]uint64

// Passed is every frame handed to the kernel.
func (s *Stats) Passed() uint64 {
	var n uint64
	for r := PassNotIPv4; r < NumReasons; r++ {
		n += s[r]
	}
	return n
}

// Stats reads the per-CPU counters.
func (p *Program) Stats() (Stats, error) {
	var s Stats
	for r := Reason(0); r < NumReasons; r++ {
		var perCPU []uint64
		if err := p.st.Lookup(uint32(r), &perCPU); err != nil {
			return Stats{}, fmt.Errorf("xdp: reading the %s counter: %w", r, err)
		}
		for _, v := range perCPU {
			s[r] += v
		}
	}
	return s, nil
}
