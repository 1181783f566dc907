package devargs

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPCIDisagreements lists the device strings on which the validators
// this package replaced disagreed: internal/config's (a regexp: an
// optional 4-digit domain, function 0-7, no arguments) and pmd's (any
// number of hex digits below 0x10000 per field, any hex function,
// arguments after a comma), which sorted the EAL's -a and --vdev. The
// columns config and pmd say what each answered; pci and name are the
// one answer now, name being what DPDK registers the device under and
// ports are opened by.
func TestPCIDisagreements(t *testing.T) {
	for _, tc := range []struct {
		in          string
		config, pmd bool // before
		pci         bool
		name        string
	}{
		// Agreed, but the port was then opened by the string as written,
		// which DPDK does not name the device by.
		{"3b:00.0", true, true, true, "0000:3b:00.0"},
		{"0000:3B:00.0", true, true, true, "0000:3b:00.0"},
		// PCI device arguments: pmd passed them to -a, config refused
		// the port.
		{"0000:3b:00.0,rxq_cqe_comp_en=1", false, true, true, "0000:3b:00.0"},
		// Functions past 7 and devices past 0x1f do not exist.
		{"0000:3b:00.8", false, true, false, "0000:3b:00.8"},
		{"0000:3b:00.f", false, true, false, "0000:3b:00.f"},
		{"0000:3b:20.0", true, true, false, "0000:3b:20.0"},
		// Digit counts sysfs never writes.
		{"0:3b:00.0", false, true, false, "0:3b:00.0"},
		{"3:00.0", false, true, false, "3:00.0"},
		{"123:00.0", false, true, false, "123:00.0"},
		// A domain past 0xffff, as Intel VMD's: sysfs writes it in five
		// digits; both refused it.
		{"10000:e0:00.0", false, false, true, "10000:e0:00.0"},
		// Agreed and still agree.
		{"0000:3b:00.0", true, true, true, "0000:3b:00.0"},
		{"0000:3b:1f.7", true, true, true, "0000:3b:1f.7"},
		{"0000:3b:00", false, false, false, "0000:3b:00"},
		{"zz:00.0", false, false, false, "zz:00.0"},
		{"net_null0", false, false, false, "net_null0"},
		{"net_pcap0,rx_pcap=a:b.pcap", false, false, false, "net_pcap0"},
	} {
		if got := IsPCI(tc.in); got != tc.pci {
			t.Errorf("IsPCI(%q) = %v, want %v (config said %v, pmd %v)", tc.in, got, tc.pci, tc.config, tc.pmd)
		}
		if got := Name(tc.in); got != tc.name {
			t.Errorf("Name(%q) = %q, want %q", tc.in, got, tc.name)
		}
	}
}

func TestParsePCI(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PCIAddr
		ok   bool
	}{
		{"0000:3b:00.1", PCIAddr{0, 0x3b, 0, 1}, true},
		{"3B:1F.7", PCIAddr{0, 0x3b, 0x1f, 7}, true},
		{"abcd:ff:00.0", PCIAddr{0xabcd, 0xff, 0, 0}, true},
		{"ffffffff:00:00.0", PCIAddr{0xffffffff, 0, 0, 0}, true},
		{"100000000:00:00.0", PCIAddr{}, false}, // nine digits
		{"000:00:00.0", PCIAddr{}, false},
		{"", PCIAddr{}, false},
		{":00.0", PCIAddr{}, false},
		{"00:00.", PCIAddr{}, false},
		{"+0:00.0", PCIAddr{}, false},
		{"0x:00.0", PCIAddr{}, false},
		{"0_:00.0", PCIAddr{}, false},
		{"0000:3b:00.0:1", PCIAddr{}, false},
		{"0000:00:00.0 ", PCIAddr{}, false},
		{"0000:3b:00.0,x=1", PCIAddr{}, false}, // an address, not a device string
	} {
		got, err := ParsePCI(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePCI(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadPCI) {
			t.Errorf("ParsePCI(%q): %v does not wrap ErrBadPCI", tc.in, err)
		}
		if c, ok := CanonicalPCI(tc.in); ok != tc.ok || ok && c != tc.want.String() {
			t.Errorf("CanonicalPCI(%q) = %q, %v", tc.in, c, ok)
		}
	}
	if s := (PCIAddr{0x10000, 0xe0, 0x1f, 7}).String(); s != "10000:e0:1f.7" {
		t.Errorf("String = %q", s)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Device
		err  string
	}{
		{"0000:3b:00.0", Device{Name: "0000:3b:00.0", PCI: true, Addr: PCIAddr{Bus: 0x3b}}, ""},
		{"3b:00.1,rxq_cqe_comp_en=1,txq_inline=128", Device{Name: "0000:3b:00.1", PCI: true, Addr: PCIAddr{Bus: 0x3b, Function: 1},
			Args: []Arg{{"rxq_cqe_comp_en", "1"}, {"txq_inline", "128"}}}, ""},
		{"net_af_packet0,iface=veth0", Device{Name: "net_af_packet0", Args: []Arg{{"iface", "veth0"}}}, ""},
		{"net_pcap0,rx_pcap=/a/b:c.pcap,infinite_rx=1,rx_pcap=/d.pcap", Device{Name: "net_pcap0",
			Args: []Arg{{"rx_pcap", "/a/b:c.pcap"}, {"infinite_rx", "1"}, {"rx_pcap", "/d.pcap"}}}, ""},
		{"net_null0,empty=", Device{Name: "net_null0", Args: []Arg{{"empty", ""}}}, ""},
		{"eth0", Device{}, `"eth0" is neither a PCI address`},
		{"net_null", Device{}, "neither"},     // no instance number
		{"net_Null0", Device{}, "neither"},    // upper case
		{"0000:3b:00.8", Device{}, "neither"}, // function 8
		{"net_null0,", Device{}, `argument "" is not key=value`},
		{"net_null0,iface", Device{}, `argument "iface" is not key=value`},
		{"net_null0,a-b=1", Device{}, "not key=value"},
		{"", Device{}, "neither"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrBadDevice) {
				t.Errorf("Parse(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.Name != tc.want.Name || got.PCI != tc.want.PCI || got.Addr != tc.want.Addr || !slices.Equal(got.Args, tc.want.Args) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	d, _ := Parse("net_pcap0,rx_pcap=a,tx_pcap=b,rx_pcap=c")
	if v := d.Values("rx_pcap"); !slices.Equal(v, []string{"a", "c"}) || d.Values("iface") != nil {
		t.Errorf("Values: %q, %q", v, d.Values("iface"))
	}
}

// FuzzParse checks that Parse, IsPCI, Name and ParsePCI agree: a device
// Parse accepts has the name Name gives, is PCI when IsPCI says so, and
// a PCI name parses back to its address.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0000:3b:00.0", "3B:1f.7,a=b", "net_null0,x=1,y=", "10000:e0:00.0", "0:3b:00.8", "net_pcap0,rx_pcap=a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		name := Name(s)
		if err != nil {
			if !errors.Is(err, ErrBadDevice) {
				t.Fatalf("Parse(%q): %v does not wrap ErrBadDevice", s, err)
			}
			return
		}
		if d.Name != name || d.PCI != IsPCI(s) {
			t.Fatalf("Parse(%q) = %+v; Name %q, IsPCI %v", s, d, name, IsPCI(s))
		}
		if d.PCI {
			a, err := ParsePCI(d.Name)
			if err != nil || a != d.Addr || a.String() != d.Name {
				t.Fatalf("%q: name %q parses to %v, %v; address %v", s, d.Name, a, err, d.Addr)
			}
			if strings.ContainsAny(d.Name, "/ ") || d.Addr.Device > maxDevice || d.Addr.Function > maxFunction {
				t.Fatalf("%q: %+v", s, d)
			}
		}
	})
}
