package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// checkInstances compares the configuration cfg, read from path, with
// every other instance on the machine (dir/*.yaml): two daemons cannot
// share an EAL file prefix, a metrics address, a NIC or an exception
// path's interface (config.Clashes). It returns how many it compared. A
// file there that does not parse is reported on stderr and left out: its
// own start fails on it, and it must not stop this instance's.
func checkInstances(path string, cfg *config.Config, dir string, stderr io.Writer) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, fmt.Errorf("instances in %s: %w", dir, err)
	}
	self, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("config: %w", err)
	}
	var others []config.Instance
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && os.SameFile(st, self) {
			continue
		}
		c, err := config.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "check-config: instance %s left out of the comparison: %v\n", f, err)
			continue
		}
		others = append(others, config.Instance{Path: f, Config: c})
	}
	clashes := config.Clashes(cfg, others)
	if len(clashes) == 0 {
		return len(others), nil
	}
	lines := make([]string, len(clashes))
	for i, c := range clashes {
		lines[i] = c.Error()
	}
	return len(others), fmt.Errorf("config %s: clashes with another instance on this machine:\n  %s", path, strings.Join(lines, "\n  "))
}
