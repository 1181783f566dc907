package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
)

// InstanceDir holds a machine's instances, one file a NIC: the unit
// cephdpdkd@NAME runs InstanceDir/NAME.yaml.
const InstanceDir = "/etc/cephdpdkd"

// Instance is one of a machine's configurations.
type Instance struct {
	Path   string
	Config *Config
}

// Clash is something a configuration shares with another instance that
// two daemons on one machine cannot share.
type Clash struct {
	Key   string // the configuration key, as the file spells it
	Value string
	Other string // the other instance's path
	Hint  string // what to do, or ""
}

func (c Clash) Error() string {
	s := fmt.Sprintf("%s %s is also %s's", c.Key, c.Value, c.Other)
	if c.Hint != "" {
		s += ": " + c.Hint
	}
	return s
}

// resources lists what an instance holds on the machine, key → values:
// the EAL file prefix (its runtime directory and lock), the metrics
// address, the NIC (a PCI address, a kernel interface a PMD or the XDP
// program takes), the exception path's interface, and the poll loops'
// lcores.
func (c *Config) resources() map[string][]string {
	r := map[string][]string{"eal.file_prefix": {c.EAL.FilePrefix}}
	if c.Metrics.Listen != MetricsOff {
		r["metrics.listen"] = []string{c.Metrics.Listen}
	}
	var nics []string
	if d, err := devargs.Parse(c.Port.Device); err == nil {
		if d.PCI {
			nics = append(nics, "PCI device "+d.Name)
		}
		// net_af_packet and net_af_xdp take a kernel interface.
		for _, iface := range d.Values("iface") {
			nics = append(nics, "interface "+iface)
		}
	}
	if iface, pci := c.Port.BindTarget(); iface != "" {
		nics = append(nics, "interface "+iface)
	} else if pci != "" {
		nics = append(nics, "PCI device "+pci)
	}
	if c.Port.IsAFXDP() && c.Port.AFXDP != nil {
		nics = append(nics, "interface "+c.Port.AFXDP.Interface)
	}
	r["port"] = nics
	// Each poll loop spins on its lcore: two on one CPU halve each
	// other. Main lcores may be shared: they run the Go runtime's DPDK
	// calls, not a poll loop.
	for _, p := range c.Pollers {
		r["poll loop lcore"] = append(r["poll loop lcore"], strconv.Itoa(p.Lcore))
	}
	if k := c.Kernel; k != nil {
		where := ""
		if k.NetNS != "" {
			where = " in netns " + k.NetNS
		}
		r["kernel.interface"] = []string{k.Interface + where}
	}
	return r
}

// sameListen reports whether two metrics addresses conflict: the same
// port on the same host, or on a wildcard address, which takes the port
// on every address.
func sameListen(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if pa != pb {
		return false
	}
	wild := func(h string) bool {
		ip, err := netip.ParseAddr(h)
		return h == "" || err == nil && ip.IsUnspecified()
	}
	return ha == hb || wild(ha) || wild(hb)
}

// Clashes returns what c shares with others that two daemons on one
// machine cannot share: eal.file_prefix (the default, "cephdpdkd-" and
// port.name, differs when the port's names do), metrics.listen (one port
// an instance: DefaultMetricsListen's, then the next ones), the NIC, the
// exception path's interface (kernel.interface, port.name by default),
// and the CPUs of the poll loops.
func Clashes(c *Config, others []Instance) []Clash {
	var out []Clash
	mine := c.resources()
	for _, o := range others {
		theirs := o.Config.resources()
		for _, key := range []string{"eal.file_prefix", "metrics.listen", "port", "kernel.interface", "poll loop lcore"} {
			for _, v := range mine[key] {
				for _, w := range theirs[key] {
					same := v == w
					if key == "metrics.listen" {
						same = sameListen(v, w)
					}
					if !same {
						continue
					}
					cl := Clash{Key: key, Value: v, Other: o.Path}
					switch key {
					case "eal.file_prefix":
						cl.Hint = "give each instance its own port.name (the prefix's default) or file_prefix"
					case "metrics.listen":
						cl.Hint = "a port no instance uses: " + FreeMetricsListen(append([]Instance{{Config: c}}, others...))
					case "kernel.interface":
						cl.Hint = "each instance's exception path needs its own interface name"
					case "poll loop lcore":
						cl.Hint = "give each instance's poll loops CPUs of their own (eal.lcores, pollers)"
					}
					out = append(out, cl)
				}
			}
		}
	}
	return out
}

// FreeMetricsListen returns the first address of the scheme, from
// DefaultMetricsListen's port upward, that none of the instances
// listens on.
func FreeMetricsListen(instances []Instance) string {
	host, port, _ := net.SplitHostPort(DefaultMetricsListen)
	p, _ := strconv.Atoi(port)
	for ; ; p++ {
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		taken := false
		for _, in := range instances {
			if l := in.Config.Metrics.Listen; l != MetricsOff && sameListen(addr, l) {
				taken = true
			}
		}
		if !taken {
			return addr
		}
	}
}
