package kernelif_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
)

// TestApplyRead gives a veth in a namespace the node's network and reads
// it back: the addresses (IPv6 ones out of duplicate address detection
// when Apply returns), then the routes through gateways, default ones
// included, with their metrics; the subnet routes the kernel adds are
// not part of it. A route whose gateway is on no subnet is refused.
func TestApplyRead(t *testing.T) {
	ns, ctx := vethNS(t), context.Background()
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	want := kernelif.Network{
		Addresses: []netip.Prefix{pfx("10.0.0.5/24"), pfx("fd00::5/64")},
		Routes: []kernelif.Route{
			{To: pfx("0.0.0.0/0"), Via: addr("10.0.0.1")},
			{To: pfx("10.9.0.0/16"), Via: addr("10.0.0.254"), Metric: 100},
			{To: pfx("::/0"), Via: addr("fd00::1"), Metric: 1024},
		},
	}
	var (
		got       kernelif.Network
		tentative []string
	)
	err := ns.Do(func() error {
		if err := kernelif.Apply("cdd0", want); err != nil {
			return err
		}
		link, err := netlink.LinkByName("cdd0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a.Flags&unix.IFA_F_TENTATIVE != 0 {
				tentative = append(tentative, a.IPNet.String())
			}
		}
		got, err = kernelif.Read("cdd0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tentative) > 0 {
		t.Errorf("addresses %v still tentative after Apply", tentative)
	}
	sortNet := func(n kernelif.Network) kernelif.Network {
		slices.SortFunc(n.Addresses, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
		slices.SortFunc(n.Routes, func(a, b kernelif.Route) int { return strings.Compare(a.String(), b.String()) })
		return n
	}
	if !reflect.DeepEqual(sortNet(got), sortNet(want)) {
		t.Errorf("read back %+v\nwant %+v", got, want)
	}
	// What a state file keeps of it.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back kernelif.Network
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, got) {
		t.Errorf("JSON %s reads back as %+v (%v)", b, back, err)
	}

	// What a network manager adds on top is foreign.
	if out, err := ns.Exec(ctx, "sh", "-c", "ip addr add 10.0.0.77/24 dev cdd0 && ip route add 10.6.0.0/16 via 10.0.0.1 dev cdd0"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var foreign kernelif.Network
	if err := ns.Do(func() (err error) { got, err = kernelif.Read("cdd0"); return }); err != nil {
		t.Fatal(err)
	}
	foreign = got.Minus(want)
	wantForeign := kernelif.Network{Addresses: []netip.Prefix{pfx("10.0.0.77/24")}, Routes: []kernelif.Route{{To: pfx("10.6.0.0/16"), Via: addr("10.0.0.1")}}}
	if !reflect.DeepEqual(foreign, wantForeign) {
		t.Errorf("foreign %+v, want %+v", foreign, wantForeign)
	}

	err = ns.Do(func() error {
		return kernelif.Apply("cdd0", kernelif.Network{Routes: []kernelif.Route{{To: pfx("10.7.0.0/16"), Via: addr("10.5.0.1")}}})
	})
	if err == nil || !strings.Contains(err.Error(), "route 10.7.0.0/16 via 10.5.0.1") {
		t.Errorf("a gateway on no subnet: %v; want the route named in an error", err)
	}
}

// TestSetupForeign: right after Setup nothing on the interface is
// foreign (an IPv6 route without a metric gets the kernel's 1024); an
// address added by someone else is.
func TestSetupForeign(t *testing.T) {
	ns, ctx := vethNS(t), context.Background()
	n := kernelif.Network{
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24"), netip.MustParsePrefix("fd00::5/64")},
		Routes: []kernelif.Route{{To: netip.MustParsePrefix("::/0"), Via: netip.MustParseAddr("fd00::1")},
			{To: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("10.0.0.1")}},
	}
	var before, after kernelif.Network
	err := ns.Do(func() error {
		i, err := kernelif.Setup(kernelif.Config{Name: "cdd0", MTU: 1400, Network: n})
		if err != nil {
			return err
		}
		if before, err = i.Foreign(); err != nil {
			return err
		}
		if out, err := ns.Exec(ctx, "ip", "addr", "add", "10.0.0.77/24", "dev", "cdd0"); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		after, err = i.Foreign()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !before.Empty() {
		t.Errorf("foreign right after Setup: %+v", before)
	}
	if want := (kernelif.Network{Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.77/24")}}); !reflect.DeepEqual(after, want) {
		t.Errorf("foreign after an address was added: %+v, want %+v", after, want)
	}
}

// vethNS returns a namespace holding veth cdd0 (IPv6 on, down), whose
// peer cdd1 is up.
func vethNS(t *testing.T) *testenv.NetNS {
	t.Helper()
	ns := testenv.NewNetNS(t)
	if out, err := ns.Exec(context.Background(), "sh", "-c", "ip link add cdd0 type veth peer name cdd1 && ip link set cdd1 up && "+
		"echo 0 >/proc/sys/net/ipv6/conf/cdd0/disable_ipv6"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return ns
}
