package config

import (
	"path/filepath"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
)

// Hugepages has the daemon provide the EAL's hugepages itself: at start
// it raises the kernel's reservation of that size to Pages free pages
// and mounts hugetlbfs at Mount if nothing is mounted there; at stop it
// gives back exactly the pages and the mount it added.
type Hugepages struct {
	// Pages is how many free pages of Size the EAL needs.
	Pages int `yaml:"pages"`
	// Size is "2M" or "1G".
	Size string `yaml:"size"`
	// Mount is the hugetlbfs mount point the EAL uses (its --huge-dir);
	// DefaultHugepageMount of the size when empty.
	Mount string `yaml:"mount"`
}

// Hugepage sizes, as eal.hugepages.size spells them, in kB as the kernel
// names them (/sys/kernel/mm/hugepages/hugepages-<kB>kB).
var hugepageSizesKB = map[string]int{"2M": 2048, "1G": 1048576}

// DefaultHugepageMount is where each size is mounted when
// eal.hugepages.mount is left out: /dev/hugepages is what systemd's
// dev-hugepages.mount provides (the default size, 2M on x86); 1G pages
// need a mount of their own.
var DefaultHugepageMount = map[string]string{"2M": "/dev/hugepages", "1G": "/dev/hugepages-1G"}

// SizeKB returns the page size in kB; 0 for an invalid size.
func (h *Hugepages) SizeKB() int { return hugepageSizesKB[h.Size] }

// Request is what the daemon asks package hugepages for.
func (h *Hugepages) Request() hugepages.Request {
	return hugepages.Request{Pages: h.Pages, SizeKB: h.SizeKB(), Mount: h.Mount}
}

// HugepageDir is the hugetlbfs mount the EAL uses: eal.hugepages.mount
// when the daemon provides the pages, else eal.huge_dir ("" lets the EAL
// pick any).
func (e *EAL) HugepageDir() string {
	if e.Hugepages != nil {
		return e.Hugepages.Mount
	}
	return e.HugeDir
}

func (c *Config) hugepagesDefaults() {
	if h := c.EAL.Hugepages; h != nil && h.Mount == "" {
		h.Mount = DefaultHugepageMount[h.Size]
	}
}

func (c *Config) validateHugepages(bad func(string, string, ...any)) {
	h := c.EAL.Hugepages
	if h == nil {
		return
	}
	if c.EAL.NoHuge {
		bad("eal.hugepages", "eal.no_huge: true runs the EAL without hugepages; drop one of the two")
	}
	kb := h.SizeKB()
	if kb == 0 {
		bad("eal.hugepages.size", "%q: want 2M or 1G", h.Size)
	}
	switch {
	case h.Pages <= 0:
		bad("eal.hugepages.pages", "%d: want at least 1", h.Pages)
	case kb > 0 && h.Pages > MaxMemoryMB/(kb>>10):
		bad("eal.hugepages.pages", "%d pages of %s are more than %d MB", h.Pages, h.Size, MaxMemoryMB)
	case kb > 0 && c.EAL.MemoryMB > h.Pages*(kb>>10):
		bad("eal.memory_mb", "%d MB do not fit in eal.hugepages: %d pages of %s are %d MB", c.EAL.MemoryMB, h.Pages, h.Size, h.Pages*(kb>>10))
	}
	if h.Mount != "" && (!filepath.IsAbs(h.Mount) || filepath.Clean(h.Mount) != h.Mount || strings.ContainsAny(h.Mount, " \t\n,")) {
		bad("eal.hugepages.mount", "%q: want an absolute, clean path without spaces or commas", h.Mount)
	}
	if c.EAL.HugeDir != "" && c.EAL.HugeDir != h.Mount {
		bad("eal.huge_dir", "%s: with eal.hugepages the EAL uses eal.hugepages.mount (%s); drop eal.huge_dir", c.EAL.HugeDir, h.Mount)
	}
}
