package pmd

import (
	"slices"
	"strings"
	"testing"
)

func TestEALArgs(t *testing.T) {
	tests := []struct {
		name string
		cfg  EALConfig
		want []string
		err  bool
	}{
		{
			name: "vdev no huge",
			cfg:  EALConfig{Lcores: "0-1", FilePrefix: "p", MemoryMB: 256, NoHuge: true, Devices: []string{"net_null0"}},
			want: []string{"cephdpdkd", "-l", "0-1", "--main-lcore", "0", "--file-prefix", "p", "-m", "256", "--no-huge", "--vdev", "net_null0", "--no-pci"},
		},
		{
			name: "pci hugepages",
			cfg:  EALConfig{Lcores: "2,4", MainLcore: 2, FilePrefix: "p", HugeDir: "/dev/hugepages", Devices: []string{"0000:3b:00.1"}, ExtraArgs: []string{"--log-level=*:info"}},
			want: []string{"cephdpdkd", "-l", "2,4", "--main-lcore", "2", "--file-prefix", "p", "--huge-dir", "/dev/hugepages", "-a", "0000:3b:00.1", "--log-level=*:info"},
		},
		{
			// A PCI address with device arguments, in the short form.
			name: "pci devargs",
			cfg:  EALConfig{Lcores: "0", FilePrefix: "p", Devices: []string{"3b:00.0,rxq_cqe_comp_en=1", "net_tap0,iface=dtap0"}},
			want: []string{"cephdpdkd", "-l", "0", "--main-lcore", "0", "--file-prefix", "p", "-a", "3b:00.0,rxq_cqe_comp_en=1", "--vdev", "net_tap0,iface=dtap0"},
		},
		{
			name: "hugepages unlinked",
			cfg:  EALConfig{Lcores: "0-1", FilePrefix: "p", HugeDir: "/dev/hugepages", HugeUnlink: true, Devices: []string{"0000:00:05.0"}},
			want: []string{"cephdpdkd", "-l", "0-1", "--main-lcore", "0", "--file-prefix", "p", "--huge-dir", "/dev/hugepages", "--huge-unlink", "-a", "0000:00:05.0"},
		},
		{
			name: "no huge ignores unlink",
			cfg:  EALConfig{Lcores: "0-1", FilePrefix: "p", NoHuge: true, HugeUnlink: true, Devices: []string{"net_null0"}},
			want: []string{"cephdpdkd", "-l", "0-1", "--main-lcore", "0", "--file-prefix", "p", "--no-huge", "--vdev", "net_null0", "--no-pci"},
		},
		{name: "no lcores", cfg: EALConfig{FilePrefix: "p"}, err: true},
		{name: "no prefix", cfg: EALConfig{Lcores: "0"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.Args()
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if !tt.err && !slices.Equal(got, tt.want) {
				t.Errorf("args\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// A secondary's command line: its own --lcores map, the primary's file
// prefix, no memory or device options (they are the primary's).
func TestSecondaryArgs(t *testing.T) {
	args, err := EALConfig{Lcores: "0@(0-3)", FilePrefix: "cdd-x", Secondary: true, MemoryMB: 512, HugeDir: "/h", Devices: []string{"net_null0"}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := "cephdpdk-service --lcores 0@(0-3) --main-lcore 0 --file-prefix cdd-x --proc-type=secondary --no-pci"
	if got := strings.Join(args, " "); got != want {
		t.Errorf("args %q, want %q", got, want)
	}
}
