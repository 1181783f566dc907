package config

import "testing"

func TestHugepagesSection(t *testing.T) {
	const rest = "port: {name: p, device: net_null0}\nservices: [{name: a}]\ndefault_service: a\n"
	tests := []struct {
		name, eal string
		want      string // "" for valid, else a substring of the error
		dir       string // HugepageDir when valid
	}{
		{"2M default mount", "eal:\n  hugepages: {pages: 512, size: 2M}\n", "", "/dev/hugepages"},
		{"1G default mount", "eal:\n  hugepages: {pages: 2, size: 1G}\n", "", "/dev/hugepages-1G"},
		{"own mount", "eal:\n  memory_mb: 256\n  hugepages: {pages: 128, size: 2M, mount: /mnt/huge}\n", "", "/mnt/huge"},
		{"same huge_dir", "eal:\n  huge_dir: /mnt/huge\n  hugepages: {pages: 512, size: 2M, mount: /mnt/huge}\n", "", "/mnt/huge"},
		{"without hugepages", "eal:\n  huge_dir: /mnt/huge\n", "", "/mnt/huge"},
		{"no_huge", "eal:\n  no_huge: true\n  hugepages: {pages: 512, size: 2M}\n",
			"line 3: eal.hugepages: eal.no_huge: true runs the EAL without hugepages; drop one of the two", ""},
		{"bad size", "eal:\n  hugepages:\n    pages: 512\n    size: 4M\n", `line 4: eal.hugepages.size: "4M": want 2M or 1G`, ""},
		{"zero pages", "eal:\n  hugepages:\n    pages: 0\n    size: 2M\n", "line 3: eal.hugepages.pages: 0: want at least 1", ""},
		{"negative pages", "eal:\n  hugepages: {pages: -4, size: 2M}\n", "eal.hugepages.pages: -4: want at least 1", ""},
		{"too many pages", "eal:\n  hugepages: {pages: 2000, size: 1G}\n", "eal.hugepages.pages: 2000 pages of 1G are more than 1048576 MB", ""},
		{"memory does not fit", "eal:\n  memory_mb: 512\n  hugepages: {pages: 128, size: 2M}\n",
			"line 2: eal.memory_mb: 512 MB do not fit in eal.hugepages: 128 pages of 2M are 256 MB", ""},
		{"relative mount", "eal:\n  hugepages: {pages: 512, size: 2M, mount: huge}\n", `eal.hugepages.mount: "huge": want an absolute, clean path`, ""},
		{"other huge_dir", "eal:\n  huge_dir: /dev/hugepages\n  hugepages: {pages: 512, size: 2M, mount: /mnt/huge}\n",
			"line 2: eal.huge_dir: /dev/hugepages: with eal.hugepages the EAL uses eal.hugepages.mount (/mnt/huge); drop eal.huge_dir", ""},
		{"unknown key", "eal:\n  hugepages: {pages: 512, size: 2M, count: 3}\n", "field count not found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.eal + rest))
			if !checkErr(t, "Parse", err, tt.want) || tt.want != "" {
				return
			}
			if got := c.EAL.HugepageDir(); got != tt.dir {
				t.Errorf("HugepageDir() = %q, want %q", got, tt.dir)
			}
		})
	}
}
