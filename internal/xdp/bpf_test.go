package xdp

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
)

// requireBPF fails clearly where the test cannot load programs at all.
func requireBPF() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("xdp: loading BPF programs needs root")
	}
	return nil
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
