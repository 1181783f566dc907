package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestExampleConfigs runs check-config on every shipped configuration and
// checks what each declares: its services and their consumers, where the
// kernel path and the RoCE endpoint are, and the bridge's ports. A file
// that counts and discards a Ceph service's packets must say so in its
// name: nobody should start a node from it by mistake.
func TestExampleConfigs(t *testing.T) {
	want := map[string]struct {
		services []string // "name consumer", in order
		paths    []string // lines of check-config's output after the poll loops
	}{
		"cephdpdkd.yaml": {
			services: []string{"mon count", "osd count", "roce count", "unclaimed count"},
		},
		"examples/ceph-node.yaml": {
			services: []string{"mon kernel", "osd kernel", "roce roce", "other kernel"},
			paths: []string{
				"kernel exception path: interface ens3f0 (tap) in the daemon's namespace, addresses [192.0.2.10/24], routes [default via 192.0.2.1]",
				"roce endpoint: 192.0.2.10 on service roce, at most 4096 sessions",
				"roce bridge: rdma_cm ports [3300 6800-7568] to kernel TCP on 192.0.2.10",
			},
		},
		"examples/ceph-node-afxdp.yaml": {
			services: []string{"roce roce", "other count"},
			paths: []string{
				"roce endpoint: 192.0.2.10 on service roce, at most 4096 sessions",
				"roce bridge: rdma_cm ports [3300 6800-7568] to kernel TCP on 192.0.2.10",
			},
		},
		"examples/af-packet-veth-discard.yaml": {
			services: []string{"mon count", "osd count", "roce count", "unclaimed count"},
		},
		"examples/pci-nic-discard.yaml": {
			services: []string{"mon count", "osd count", "roce count", "unclaimed count"},
		},
	}
	files, _ := filepath.Glob("../../configs/*.yaml")
	more, _ := filepath.Glob("../../configs/examples/*.yaml")
	files = append(files, more...)
	if len(files) != len(want) {
		t.Errorf("%d shipped configs, the test knows %d: %v", len(files), len(want), files)
	}
	serviceLine := regexp.MustCompile(`^service (\S+): \d+ lanes of \d+, consumer (\S+)`)
	for _, f := range files {
		name, _ := filepath.Rel("../../configs", f)
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("a new shipped config: add it to this test")
			}
			if _, err := os.Stat(f); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI("check-config", "--offline", f)
			if code != 0 {
				t.Fatalf("check-config: exit %d\n%s%s", code, out, errOut)
			}
			var services, paths []string
			afterLoops := false
			discards := false
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if m := serviceLine.FindStringSubmatch(l); m != nil {
					services = append(services, m[1]+" "+m[2])
					if m[2] == "count" && (m[1] == "mon" || m[1] == "osd") {
						discards = true
						if !strings.Contains(l, "discards every packet") {
							t.Errorf("a count consumer's line does not say it discards: %q", l)
						}
					}
				}
				if strings.HasPrefix(l, "poll loop on lcore") {
					afterLoops = true
					continue
				}
				if afterLoops {
					paths = append(paths, l)
				}
			}
			if !slices.Equal(services, w.services) {
				t.Errorf("services %q, want %q\n%s", services, w.services, out)
			}
			if !slices.Equal(paths, w.paths) {
				t.Errorf("paths %q, want %q\n%s", paths, w.paths, out)
			}
			// The embedded default is a demo on a replayed capture, not a
			// file an operator copies.
			if strings.HasPrefix(name, "examples/") && discards != strings.Contains(name, "-discard") {
				t.Errorf("discards Ceph's packets: %v, but the name says %v", discards, !discards)
			}
			if discards && strings.HasPrefix(name, "examples/") {
				b, _ := os.ReadFile(f)
				if first, _, _ := strings.Cut(string(b), "\n"); !strings.Contains(strings.ToLower(first), "discards") {
					t.Errorf("the first comment line does not say it discards: %q", first)
				}
			}
		})
	}
}
