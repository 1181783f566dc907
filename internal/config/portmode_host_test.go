package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

// TestAFXDPHost checks the af_xdp mode's interface on a real veth: its
// queues against port.rx_queues, its MTU against roce.mtu, its addresses
// against roce.address, and a missing interface.
func TestAFXDPHost(t *testing.T) {
	v := testenv.NewVethNS(t, netip.Prefix{})
	if err := netcmd.IP("addr", "add", "192.0.2.10/24", "dev", v.HostIf); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, iface, port, roce, want string
	}{
		{"fits", v.HostIf, "  rx_queues: 1\n", "", ""},
		{"queues", v.HostIf, "  rx_queues: 2\n", "", "port.rx_queues: 2, but " + v.HostIf + " has 1 receive queues"},
		{"mtu", v.HostIf, "", "  mtu: 2048\n", "roce.mtu: path MTU 2048 does not fit " + v.HostIf + "'s MTU 1500"},
		{"missing", "cddx-nothere", "", "", "no such interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: "+tc.iface+"}\n"+tc.port, tc.roce+"eal: {no_huge: true}\n")))
			if err != nil {
				t.Fatal(err)
			}
			checkErr(t, "CheckHost", c.CheckHost(), tc.want)
		})
	}
	t.Run("address", func(t *testing.T) {
		yaml := strings.Replace(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: "+v.HostIf+"}\n", "eal: {no_huge: true}\n"),
			"address: 192.0.2.10", "address: 192.0.2.99", 1)
		c, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		checkErr(t, "CheckHost", c.CheckHost(), "roce.address: 192.0.2.99 is not an address of "+v.HostIf+" ([192.0.2.10])")
	})
}
