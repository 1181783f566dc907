package sysguest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// TestWriteCPIO unpacks writeCPIO's archives with the cpio tool, which
// reads newc as the kernel does, and checks what comes out.
func TestWriteCPIO(t *testing.T) {
	// The archive is read back with the cpio tool.
	harness.RequireCommands(t, "apt-get install cpio", "cpio")
	tests := []struct {
		name  string
		files []File
	}{
		{"none", nil},
		{"one", []File{{Path: "/a", Data: []byte("x")}}},
		{"nested and modes", []File{
			{Path: "/usr/local/bin/tool", Mode: 0o755, Data: bytes.Repeat([]byte{0, 1, 2}, 1001)},
			{Path: "/etc/cephdpdkd/data0.yaml", Data: []byte("port:\n  name: data0\n")},
			{Path: "/etc/cephdpdkd/empty", Data: nil},
			{Path: "/etc/systemd/system/multi-user.target.wants/a.service", Link: "/etc/systemd/system/a.service"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeCPIO(&buf, tt.files); err != nil {
				t.Fatal(err)
			}
			if buf.Len()%4 != 0 {
				t.Errorf("archive of %d bytes is not 4-byte aligned", buf.Len())
			}
			dir := t.TempDir()
			cmd := exec.Command("cpio", "-i", "-d", "--quiet", "--no-absolute-filenames")
			cmd.Dir, cmd.Stdin = dir, &buf
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cpio -i: %v: %s", err, out)
			}
			for _, f := range tt.files {
				p := filepath.Join(dir, strings.TrimPrefix(f.Path, "/"))
				if f.Link != "" {
					if got, err := os.Readlink(p); err != nil || got != f.Link {
						t.Errorf("%s: link to %q (%v), want %q", f.Path, got, err, f.Link)
					}
					continue
				}
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, f.Data) {
					t.Errorf("%s: %d bytes back, want %d", f.Path, len(got), len(f.Data))
				}
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				want := os.FileMode(f.Mode)
				if want == 0 {
					want = 0o644
				}
				if fi.Mode().Perm() != want {
					t.Errorf("%s: mode %v, want %v", f.Path, fi.Mode().Perm(), want)
				}
			}
		})
	}
}

func TestWriteCPIOBadPath(t *testing.T) {
	for _, p := range []string{"", "rel/file", "/", "/a/../b", "/a/"} {
		if err := writeCPIO(&bytes.Buffer{}, []File{{Path: p}}); err == nil {
			t.Errorf("path %q: no error", p)
		}
	}
}
