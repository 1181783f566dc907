// Package sysfs writes the kernel's attribute files (sysfs, and /proc/sys
// knobs like them) for internal/nicbind and internal/hugepages.
package sysfs

import "os"

// Write writes data to the attribute at path, which exists: it is never
// created, as a missing attribute is the caller's error to see.
func Write(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Default is where sysfs is mounted.
const Default = "/sys"

// Root is the sysfs root dir names, Default when dir is "" (a test
// passes a fake tree's).
func Root(dir string) string {
	if dir == "" {
		return Default
	}
	return dir
}
