package kernelif_test

import (
	"context"
	"encoding/json"
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
	ns := testenv.NewNetNS(t)
	ctx := context.Background()
	if out, err := ns.Exec(ctx, "sh", "-c", "ip link add cdd0 type veth peer name cdd1 && ip link set cdd1 up && "+
		"echo 0 >/proc/sys/net/ipv6/conf/cdd0/disable_ipv6"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
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

	err = ns.Do(func() error {
		return kernelif.Apply("cdd0", kernelif.Network{Routes: []kernelif.Route{{To: pfx("10.7.0.0/16"), Via: addr("10.5.0.1")}}})
	})
	if err == nil || !strings.Contains(err.Error(), "route 10.7.0.0/16 via 10.5.0.1") {
		t.Errorf("a gateway on no subnet: %v; want the route named in an error", err)
	}
}
