package config

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// pretendCPUs makes CheckHost see a machine whose process may run on cpus.
func pretendCPUs(t *testing.T, cpus ...int) {
	t.Helper()
	old := allowedCPUs
	t.Cleanup(func() { allowedCPUs = old })
	allowedCPUs = func() (unix.CPUSet, error) {
		var s unix.CPUSet
		for _, c := range cpus {
			s.Set(c)
		}
		return s, nil
	}
}

// captures writes test captures to dir and returns their paths by name.
func captures(t *testing.T, dir string) map[string]string {
	t.Helper()
	type order interface {
		binary.ByteOrder
		binary.AppendByteOrder
	}
	var le, be order = binary.LittleEndian, binary.BigEndian
	pcapHeader := func(o order) []byte {
		b := make([]byte, 24)
		o.PutUint32(b, 0xa1b2c3d4)
		o.PutUint16(b[4:], 2)
		o.PutUint16(b[6:], 4)
		o.PutUint32(b[16:], 65535)
		o.PutUint32(b[20:], 1)
		return b
	}
	record := func(o order) []byte {
		b := make([]byte, 16+60)
		o.PutUint32(b[8:], 60)
		o.PutUint32(b[12:], 60)
		return b
	}
	block := func(o order, typ uint32, body []byte) []byte {
		n := 12 + len(body)
		b := make([]byte, 8, n)
		o.PutUint32(b, typ)
		o.PutUint32(b[4:], uint32(n))
		b = append(b, body...)
		return o.AppendUint32(b, uint32(n))
	}
	shb := func(o order) []byte {
		body := o.AppendUint32(nil, 0x1a2b3c4d)
		body = o.AppendUint16(body, 1)
		body = o.AppendUint16(body, 0)
		body = o.AppendUint64(body, ^uint64(0))
		return block(o, 0x0a0d0d0a, body)
	}
	idb := func(o order) []byte { return block(o, 1, make([]byte, 8)) }
	epb := func(o order) []byte {
		body := make([]byte, 20, 20+60)
		o.PutUint32(body[12:], 60)
		o.PutUint32(body[16:], 60)
		return block(o, 6, append(body, make([]byte, 60)...))
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	files := map[string][]byte{
		"empty.pcap":          pcapHeader(le),
		"one.pcap":            cat(pcapHeader(le), record(le)),
		"one-be.pcap":         cat(pcapHeader(be), record(be)),
		"empty.pcapng":        cat(shb(le), idb(le)),
		"one.pcapng":          cat(shb(le), idb(le), epb(le)),
		"one-be.pcapng":       cat(shb(be), idb(be), epb(be)),
		"two-sections.pcapng": cat(shb(le), idb(le), shb(be), idb(be), epb(be)),
		"truncated.pcapng":    cat(shb(le), idb(le)[:10]),
		"zero.pcap":           nil,
		"text.pcap":           []byte("port: {name: x}\n"),
	}
	paths := map[string]string{}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

func TestCaptureHasFrames(t *testing.T) {
	c := captures(t, t.TempDir())
	tests := []struct {
		file   string
		frames bool
		err    bool
	}{
		{"empty.pcap", false, false},
		{"one.pcap", true, false},
		{"one-be.pcap", true, false},
		{"empty.pcapng", false, false},
		{"one.pcapng", true, false},
		{"one-be.pcapng", true, false},
		{"two-sections.pcapng", true, false},
		{"truncated.pcapng", false, true},
		{"zero.pcap", false, true},
		{"text.pcap", false, true},
	}
	for _, tt := range tests {
		frames, err := captureHasFrames(c[tt.file])
		if frames != tt.frames || (err != nil) != tt.err {
			t.Errorf("%s: frames %v, err %v; want frames %v, error %v", tt.file, frames, err, tt.frames, tt.err)
		}
	}
	for _, f := range []string{"../../configs/sample/ceph-node.pcap", "../../roce/testdata/rxe-rping-g1g2.pcapng"} {
		if frames, err := captureHasFrames(f); !frames || err != nil {
			t.Errorf("%s: frames %v, err %v", f, frames, err)
		}
	}
}

// CheckHost refuses what this machine cannot run, with the line.
func TestCheckHost(t *testing.T) {
	pretendCPUs(t, 0, 1)
	dir := t.TempDir()
	c := captures(t, dir)
	const cfg = `eal:
  lcores: "0-1"
  no_huge: true
port:
  name: p0
  device: "net_null0"
services: [{name: other}]
default_service: other
`
	tests := []struct {
		name, from, to string
		want           []string // nil: no error
	}{
		{"lcores on this machine", "", "", nil},
		{"lcores beyond it", `lcores: "0-1"`, `lcores: "0-3"`,
			[]string{"line 2: eal.lcores: lcores 2-3 are not CPUs this process may run on; available CPUs on this machine: 0-1"}},
		{"one lcore beyond it", `lcores: "0-1"`, `lcores: "0,1,5"`, []string{"line 2: eal.lcores: lcore 5 is not a CPU"}},
		{"runtime CPUs on this machine", `lcores: "0-1"`, `lcores: "0-1"` + "\n  runtime_cpus: \"0-1\"", nil},
		{"runtime CPUs beyond it", `lcores: "0-1"`, `lcores: "0-1"` + "\n  runtime_cpus: \"0,7\"",
			[]string{"line 3: eal.runtime_cpus: lcore 7 is not a CPU"}},
		{"infinite_rx over an empty pcap", "net_null0", "net_pcap0,rx_pcap=" + c["empty.pcap"] + ",infinite_rx=1",
			[]string{"line 6: port.device:", "holds no frames", "infinite_rx"}},
		{"infinite_rx over an empty pcapng", "net_null0", "net_pcap0,rx_pcap=" + c["empty.pcapng"] + ",infinite_rx=1",
			[]string{"line 6: port.device:", "holds no frames"}},
		{"infinite_rx over frames", "net_null0", "net_pcap0,rx_pcap=" + c["one.pcapng"] + ",infinite_rx=1", nil},
		{"infinite_rx=0 over an empty pcap", "net_null0", "net_pcap0,rx_pcap=" + c["empty.pcap"] + ",infinite_rx=0", nil},
		{"empty pcap replayed once", "net_null0", "net_pcap0,rx_pcap=" + c["empty.pcap"], nil},
		{"the embedded capture", "net_null0", "net_pcap0,rx_pcap=" + SamplePcapToken + ",infinite_rx=1", nil},
		{"missing capture", "net_null0", "net_pcap0,rx_pcap=" + filepath.Join(dir, "nope.pcap"),
			[]string{"line 6: port.device: rx_pcap=", "no such file"}},
		{"not a capture", "net_null0", "net_pcap0,rx_pcap=" + c["text.pcap"], []string{"line 6: port.device:", "not a pcap or pcapng capture"}},
		{"tx_pcap into a missing directory", "net_null0", "net_pcap0,rx_pcap=" + c["one.pcap"] + ",tx_pcap=/nonexistent/out.pcap",
			[]string{"line 6: port.device: tx_pcap=/nonexistent/out.pcap: directory /nonexistent does not exist"}},
		{"missing interface", "net_null0", "net_af_packet0,iface=cddnosuch0", []string{"line 6: port.device: iface=cddnosuch0: no such network interface"}},
		{"loopback interface", "net_null0", "net_af_packet0,iface=lo", nil},
		{"missing PCI device", `"net_null0"`, `"ff:1f.7"`, []string{"line 6: port.device: PCI device 0000:ff:1f.7 does not exist on this machine"}},
		{"huge_dir not hugetlbfs", "no_huge: true", "no_huge: false\n  huge_dir: " + dir,
			[]string{"line 4: eal.huge_dir: " + dir + " is not a hugetlbfs mount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := strings.Replace(cfg, tt.from, tt.to, 1)
			c, err := Parse([]byte(y))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkErr(t, "CheckHost", c.CheckHost(), tt.want...)
		})
	}
}

func TestFormatLcores(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0-1": "0-1", "0,2-4,7": "0,2-4,7", "1,3,5": "1,3,5"} {
		ls, err := ParseLcores(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatLcores(ls); got != want {
			t.Errorf("formatLcores(%v) = %q, want %q", ls, got, want)
		}
	}
}

// TestAllowedCPUsIgnoresThreadAffinity: a process started from a pinned
// thread (taskset, a DPDK program spawning cephdpdkd) inherits a narrow
// affinity; the EAL may still pin lcores to every online CPU of its
// cpuset, so the check must allow them.
func TestAllowedCPUsIgnoresThreadAffinity(t *testing.T) {
	online, err := readCPUList("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skip(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var orig, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &orig)
	first := -1
	for i := 0; i < MaxLcores && first < 0; i++ {
		if orig.IsSet(i) {
			first = i
		}
	}
	one.Set(first)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	got, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if got.Count() < 2 && online.Count() >= 2 {
		t.Errorf("allowed CPUs %d from a thread pinned to CPU %d; want the online ones (%d)", got.Count(), first, online.Count())
	}
}
