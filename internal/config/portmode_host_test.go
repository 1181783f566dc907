package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
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
		{"queues", v.HostIf, "  rx_queues: 2\n", "", "line 5: port.rx_queues: 2, but " + v.HostIf + " has 1 receive queues"},
		{"mtu", v.HostIf, "", "  mtu: 2048\n", "line 12: roce.mtu: path MTU 2048 does not fit " + v.HostIf + "'s MTU 1500"},
		{"missing", "cddx-nothere", "", "", "line 4: port.af_xdp.interface: af_xdp: interface cddx-nothere: no such interface"},
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
		checkErr(t, "CheckHost", c.CheckHost(), "line 11: roce.address: 192.0.2.99 is not an address of "+v.HostIf+" ([192.0.2.10])")
	})
	// Unset, the address is the interface's one IPv4 address; with two,
	// the operator must choose.
	unset := strings.Replace(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: "+v.HostIf+"}\n", "eal: {no_huge: true}\n"),
		"  address: 192.0.2.10\n", "", 1)
	t.Run("address from the interface", func(t *testing.T) {
		c, err := Parse([]byte(unset))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckHost(); err != nil {
			t.Fatal(err)
		}
		if got := c.RoCE.Address.String(); got != "192.0.2.10/32" {
			t.Fatalf("roce.address %s, want the interface's 192.0.2.10/32", got)
		}
		if r := c.RoCERules(); len(r) != 1 || len(r[0].DstCIDRs) != 1 || r[0].DstCIDRs[0] != c.RoCE.Address {
			t.Fatalf("RoCE rules %+v: want UDP 4791 to the address only", r)
		}
	})
	t.Run("two addresses", func(t *testing.T) {
		if err := netcmd.IP("addr", "add", "198.51.100.7/24", "dev", v.HostIf); err != nil {
			t.Fatal(err)
		}
		c, err := Parse([]byte(unset))
		if err != nil {
			t.Fatal(err)
		}
		checkErr(t, "CheckHost", c.CheckHost(), "roce.address: not set, and "+v.HostIf+" has 2 IPv4 addresses [192.0.2.10 198.51.100.7]: set roce.address")
	})
}

// TestAFXDPHostNativeMTU: a native attach is refused on an interface
// whose MTU the program, not frags-aware, cannot take; a generic one
// takes any MTU.
func TestAFXDPHostNativeMTU(t *testing.T) {
	v := testenv.NewVethNS(t, netip.Prefix{})
	if err := netcmd.IP("addr", "add", "192.0.2.10/24", "dev", v.HostIf); err != nil {
		t.Fatal(err)
	}
	refusal := fmt.Sprintf("line 4: port.af_xdp.attach: native: %s's MTU is %d, but native XDP without frags support cannot take frames over MTU %d",
		v.HostIf, xdp.NativeMaxMTU+1, xdp.NativeMaxMTU)
	for _, tc := range []struct {
		name   string
		mtu    int
		attach string
		want   string
	}{
		{"native at the limit", xdp.NativeMaxMTU, "native", ""},
		{"native by default at the limit", xdp.NativeMaxMTU, "", ""},
		{"native over the limit", xdp.NativeMaxMTU + 1, "native", refusal},
		{"native by default over the limit", xdp.NativeMaxMTU + 1, "", refusal},
		{"native at 9000", 9000, "native", "MTU is 9000, but native XDP without frags support cannot take frames over MTU 3506"},
		{"generic at 9000", 9000, "generic", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := netcmd.IP("link", "set", "dev", v.HostIf, "mtu", strconv.Itoa(tc.mtu)); err != nil {
				t.Fatal(err)
			}
			attach := ""
			if tc.attach != "" {
				attach = ", attach: " + tc.attach
			}
			c, err := Parse([]byte(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: "+v.HostIf+attach+"}\n", "eal: {no_huge: true}\n")))
			if err != nil {
				t.Fatal(err)
			}
			advice := ""
			if tc.want != "" {
				advice = fmt.Sprintf("set port.af_xdp.attach: generic (a RoCE frame is at most 2048 bytes and its headers; larger frames pass to the kernel) or lower the MTU to %d", xdp.NativeMaxMTU)
			}
			checkErr(t, "CheckHost", c.CheckHost(), tc.want, advice)
		})
	}
}

// TestAFXDPHostKinds: the interface kinds the af_xdp mode cannot take,
// on real links of the kinds this kernel can make, are refused at the
// interface's line; the others are TestCheckKind's in internal/afxdp.
func TestAFXDPHostKinds(t *testing.T) {
	v := testenv.NewVethNS(t, netip.Prefix{})
	sfx := v.HostIf[len("cddh-"):]
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cddbr-" + sfx, []string{"type", "bridge"}, "is a bridge: name the NIC enslaved to it"},
		{"cddmv-" + sfx, []string{"link", v.HostIf, "type", "macvlan"}, "is a macvlan: name the NIC it sits on"},
	} {
		t.Run(tc.args[len(tc.args)-1], func(t *testing.T) {
			if err := netcmd.IP(append([]string{"link", "add", "name", tc.name}, tc.args...)...); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { netcmd.IP("link", "del", tc.name) })
			c, err := Parse([]byte(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: "+tc.name+"}\n", "eal: {no_huge: true}\n")))
			if err != nil {
				t.Fatal(err)
			}
			checkErr(t, "CheckHost", c.CheckHost(), "line 4: port.af_xdp.interface: af_xdp: interface "+tc.name+" "+tc.want)
		})
	}
}
