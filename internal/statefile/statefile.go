// Package statefile keeps the small JSON records the daemon leaves under
// its run directory (what it bound, what it reserved) so that a later
// process can undo them after a crash. A write is durable and atomic: a
// reader finds the old record or the new one, never half of one.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

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
