package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nodeInstance is a Ceph node's instance for one NIC, as
// configs/examples/ceph-node.yaml writes it, with what differs between
// two NICs' files as parameters; edits are old, new pairs replaced in
// the file.
func nodeInstance(t *testing.T, name, pci, metrics string, edits ...string) *Config {
	t.Helper()
	y := `eal: {lcores: "0-1"}
port:
  name: ` + name + `
  device: "` + pci + `"
  bind: {driver: vfio-pci, interface: ` + name + `}
services:
  - {name: other, consumer: {type: kernel}}
default_service: other
kernel: {addresses: [192.0.2.10/24]}
metrics: {listen: "` + metrics + `"}
`
	y = strings.NewReplacer(edits...).Replace(y)
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return c
}

// vdevInstance is an instance on a vdev (no NIC of its own unless the
// devargs name an interface).
func vdevInstance(t *testing.T, name, device, metrics, lcores string) *Config {
	t.Helper()
	c, err := Parse([]byte(`eal: {lcores: "` + lcores + `"}
port: {name: ` + name + `, device: "` + device + `"}
services: [{name: other}]
default_service: other
metrics: {listen: "` + metrics + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two instances on one machine: a copy for a second NIC with its own
// port name, PCI address and metrics port shares nothing; every resource
// two daemons cannot share is caught, whatever the spelling.
func TestClashes(t *testing.T) {
	first := nodeInstance(t, "ens3f0", "0000:3b:00.0", "127.0.0.1:9477")
	// other is an instance whose poll loop runs on another CPU than
	// first's (the main lcore, 0, is shared).
	other := func(name, pci, metrics string, edits ...string) *Config {
		return nodeInstance(t, name, pci, metrics, append([]string{`{lcores: "0-1"}`, `{lcores: "0,2"}`}, edits...)...)
	}
	for _, tc := range []struct {
		name   string
		a, b   *Config
		clash  []string // "key value" (b's value), in Clashes' order
		hintOf string   // a substring of the first clash's message
	}{
		{"second NIC", first, other("ens3f1", "0000:3b:00.1", "127.0.0.1:9478"), nil, ""},
		{"a copy unedited", first, nodeInstance(t, "ens3f0", "0000:3b:00.0", "127.0.0.1:9477"), []string{
			"eal.file_prefix cephdpdkd-ens3f0", "metrics.listen 127.0.0.1:9477",
			"port PCI device 0000:3b:00.0", "port interface ens3f0", "kernel.interface ens3f0", "poll loop lcore 1"}, "own port.name"},
		{"poll loops on one CPU", first, nodeInstance(t, "ens3f1", "0000:3b:00.1", "127.0.0.1:9478"), []string{
			"poll loop lcore 1"}, "CPUs of their own"},
		{"only the port name edited", first, other("ens3f1", "0000:3b:00.0", "127.0.0.1:9478"), []string{
			"port PCI device 0000:3b:00.0"}, ""},
		{"PCI address spelt short", first, other("ens3f1", "3b:00.0", "127.0.0.1:9478"), []string{
			"port PCI device 0000:3b:00.0"}, ""},
		{"metrics port not edited", first, other("ens3f1", "0000:3b:00.1", "127.0.0.1:9477"), []string{
			"metrics.listen 127.0.0.1:9477"}, "a port no instance uses: 127.0.0.1:9478"},
		{"metrics on every address", first, other("ens3f1", "0000:3b:00.1", "0.0.0.0:9477"), []string{
			"metrics.listen 0.0.0.0:9477"}, ""},
		{"metrics on IPv6's wildcard", first, other("ens3f1", "0000:3b:00.1", "[::]:9477"), []string{
			"metrics.listen [::]:9477"}, ""},
		{"metrics on another address", first, other("ens3f1", "0000:3b:00.1", "127.0.0.2:9477"), nil, ""},
		{"file prefix set alike", first, nodeInstance(t, "ens3f1", "0000:3b:00.1", "127.0.0.1:9478", `{lcores: "0-1"}`, `{lcores: "0,2", file_prefix: cephdpdkd-ens3f0}`),
			[]string{"eal.file_prefix cephdpdkd-ens3f0"}, ""},
		{"exception path's name", first, other("ens3f1", "0000:3b:00.1", "127.0.0.1:9478", "kernel: {", "kernel: {interface: ens3f0, "),
			[]string{"kernel.interface ens3f0"}, "own interface name"},
		{"exception path in another namespace", first, other("ens3f1", "0000:3b:00.1", "127.0.0.1:9478", "kernel: {", "kernel: {interface: ens3f0, netns: ceph, "),
			nil, ""},
		{"metrics off twice", vdevInstance(t, "a", "net_null0", "off", "0-1"), vdevInstance(t, "b", "net_null0", "off", "0,2"), nil, ""},
		{"af_packet on one interface", vdevInstance(t, "a", "net_af_packet0,iface=veth0", "127.0.0.1:9477", "0-1"),
			vdevInstance(t, "b", "net_af_packet1,iface=veth0", "127.0.0.1:9478", "0,2"), []string{"port interface veth0"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Clashes(tc.b, []Instance{{Path: "/etc/cephdpdkd/first.yaml", Config: tc.a}})
			var keys []string
			for _, c := range got {
				keys = append(keys, c.Key+" "+c.Value)
				if c.Other != "/etc/cephdpdkd/first.yaml" {
					t.Errorf("clash with %q, want the other instance's path", c.Other)
				}
			}
			// The value is the checked instance's, as its file spells it.
			want := strings.Join(tc.clash, "\n")
			if strings.Join(keys, "\n") != want {
				t.Errorf("clashes:\n%s\nwant:\n%s", strings.Join(keys, "\n"), want)
			}
			if tc.hintOf != "" && (len(got) == 0 || !strings.Contains(got[0].Error(), tc.hintOf)) {
				t.Errorf("first clash %v does not say %q", got, tc.hintOf)
			}
		})
	}
}

// The metrics ports' scheme: DefaultMetricsListen's port, then the next
// ones, the first that no instance takes.
func TestFreeMetricsListen(t *testing.T) {
	for _, tc := range []struct {
		taken []string
		want  string
	}{
		{nil, "127.0.0.1:9477"},
		{[]string{"127.0.0.1:9477"}, "127.0.0.1:9478"},
		{[]string{"127.0.0.1:9478", "127.0.0.1:9477"}, "127.0.0.1:9479"},
		{[]string{"0.0.0.0:9477", "off"}, "127.0.0.1:9478"},
		{[]string{"127.0.0.1:9478"}, "127.0.0.1:9477"},
	} {
		var in []Instance
		for i, l := range tc.taken {
			in = append(in, Instance{Config: vdevInstance(t, "p"+string(rune('a'+i)), "net_null0", l, "0-1")})
		}
		if got := FreeMetricsListen(in); got != tc.want {
			t.Errorf("taken %v: %s, want %s", tc.taken, got, tc.want)
		}
	}
}

// Each example, copied for a second NIC with the edits the scheme asks
// for (the NIC's name and address, the next metrics port, CPUs of its
// own for the poll loops), shares
// nothing with the first; copied unedited, it clashes.
func TestExamplesCopiedForASecondNIC(t *testing.T) {
	files, err := filepath.Glob("../../configs/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	secondNIC := strings.NewReplacer("ens3f0", "ens3f1", "0000:3b:00.0", "0000:3b:00.1", "cdd0", "cdd1", "127.0.0.1:9477", "127.0.0.1:9478",
		`lcores: "0-1"`, `lcores: "0,2"`, `lcores: "0-2"`, `lcores: "0,3-4"`, "{lcore: 1,", "{lcore: 3,", "{lcore: 2,", "{lcore: 4,")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			others := []Instance{{Path: f, Config: first}}
			second, err := Parse([]byte(secondNIC.Replace(string(b))))
			if err != nil {
				t.Fatal(err)
			}
			if c := Clashes(second, others); len(c) != 0 {
				t.Errorf("the second NIC's copy clashes: %v", c)
			}
			if c := Clashes(first, others); len(c) == 0 {
				t.Error("an unedited copy does not clash")
			}
		})
	}
}
