package config

import (
	"net/netip"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
)

// TestAFXDPHost checks the af_xdp mode's interface on a real veth: its
// queues against port.rx_queues, its MTU against roce.mtu, and a missing
// interface.
func TestAFXDPHost(t *testing.T) {
	v := testenv.NewVethNS(t, netip.Prefix{})
	for _, tc := range []struct {
		name, port, roce, want string
	}{
		{"fits", "  rx_queues: 1\n", "", ""},
		{"queues", "  rx_queues: 2\n", "", "port.rx_queues: 2, but " + v.HostIf + " has 1 receive queues"},
		{"mtu", "", "  mtu: 2048\n", "roce.mtu: path MTU 2048 does not fit " + v.HostIf + "'s MTU 1500"},
		{"missing", "", "", "no such interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iface := v.HostIf
			if tc.name == "missing" {
				iface = "cddx-nothere"
			}
			c, err := Parse([]byte(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: "+iface+"}\n"+tc.port, tc.roce+"eal: {no_huge: true}\n")))
			if err != nil {
				t.Fatal(err)
			}
			checkErr(t, "CheckHost", c.CheckHost(), tc.want)
		})
	}
}
