package sysfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/sysfs"
)

// Write replaces an attribute's content, and never creates one.
func TestWrite(t *testing.T) {
	attr, missing := filepath.Join(t.TempDir(), "nr_hugepages"), filepath.Join(t.TempDir(), "missing")
	if err := os.WriteFile(attr, []byte("1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sysfs.Write(attr, []byte("8")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(attr); string(b) != "8" {
		t.Errorf("the attribute holds %q after writing 8: not replaced", b)
	}
	if err := sysfs.Write(missing, []byte("1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Write to a missing attribute: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("Write created the missing attribute")
	}
}
