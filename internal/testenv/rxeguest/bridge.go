//go:build linux

package rxeguest

import (
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

// NSPrefix starts the name of every network namespace this package
// creates, so that leftovers are easy to spot.
const NSPrefix = "cddrxe-"

// VethPrefix starts the name of the root-namespace end of every veth pair
// Bridge.AddVeth creates.
const VethPrefix = "cddrxv"

// Switch is a Linux bridge alone in a network namespace of its own: guests
// attach through taps, the root namespace through veth pairs.
type Switch = qemuvm.Switch

// NewSwitch creates namespace "cddrxe-XXXXXX" holding bridge br0 (see
// qemuvm.NewSwitch) and registers a cleanup that deletes the namespace and
// everything in it. If hostAddr is valid it is assigned to br0. NewSwitch
// skips the test when Available reports guests cannot run, and fails it on
// any other error.
func NewSwitch(t harness.TB, hostAddr netip.Prefix) *Switch {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	return qemuvm.NewSwitch(t, NSPrefix, VethPrefix, hostAddr)
}
