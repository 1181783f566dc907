// Package statefile keeps the small JSON records the daemon leaves under
// its run directory (what it bound, what it reserved) so that a later
// process can undo them after a crash. A write is durable and atomic: a
// reader finds the old record or the new one, never half of one.
//
// Each port has one record of each kind in the directory: the NIC it
// bound (package nicbind) at port.json, the hugepages it reserved
// (package hugepages) at port.hugepages.json.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir is the run directory: under /run, so that a reboot, which
// undoes everything the records describe, also removes them.
const DefaultDir = "/run/cephdpdkd"

// Dir returns dir, or DefaultDir when dir is empty.
func Dir(dir string) string {
	if dir == "" {
		return DefaultDir
	}
	return dir
}

// Path returns the file of port's record of kind in dir (DefaultDir when
// empty): port.json for kind "", port.kind.json for another.
func Path(dir, port, kind string) string {
	name := port + ".json"
	if kind != "" {
		name = port + "." + kind + ".json"
	}
	return filepath.Join(Dir(dir), name)
}

// Write stores v as JSON at path: a temporary file in the same directory,
// fsync, rename, then fsync of the directory.
func Write(path string, v any) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Read decodes the JSON record at path into v. It reports false, and no
// error, when there is no file.
func Read(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state file: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("state file %s: %w", path, err)
	}
	return true, nil
}
