package nicbind

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
)

// netlinkActivity returns an interface's addresses and main-table routes,
// leaving out the IPv6 link-local ones the kernel adds by itself.
func netlinkActivity(ifname string) (Activity, error) {
	var a Activity
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return a, err
	}
	addrs, err := kernelif.RetryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return a, err
	}
	for _, ad := range addrs {
		if ad.IP.IsLinkLocalUnicast() && ad.IP.To4() == nil {
			continue
		}
		a.Addresses = append(a.Addresses, ad.IPNet.String())
	}
	routes, err := kernelif.RetryDump(func() ([]netlink.Route, error) { return netlink.RouteList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return a, err
	}
	for _, r := range routes {
		switch {
		case r.Dst == nil && r.Gw != nil:
			a.Routes = append(a.Routes, "default via "+r.Gw.String())
		case r.Dst == nil:
			a.Routes = append(a.Routes, "default")
		case r.Dst.IP.To4() == nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()):
		case r.Gw != nil:
			a.Routes = append(a.Routes, r.Dst.String()+" via "+r.Gw.String())
		default:
			a.Routes = append(a.Routes, r.Dst.String())
		}
	}
	return a, nil
}

func netlinkSetUp(ifname string) error {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(link)
}

func modprobe(name string) error {
	out, err := exec.Command("modprobe", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("modprobe %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
