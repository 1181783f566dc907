package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// got renders findings as "file:line API" (API "-" for imports), with
// paths relative to root.
func got(t *testing.T, root string, fs []Finding) []string {
	t.Helper()
	var out []string
	for _, f := range fs {
		file := "-"
		if f.Pos.Filename != "" {
			rel, err := filepath.Rel(root, f.Pos.Filename)
			if err != nil {
				t.Fatal(err)
			}
			file = fmt.Sprintf("%s:%d", filepath.ToSlash(rel), f.Pos.Line)
		}
		api := f.API
		if api == "" {
			api = "-"
		}
		out = append(out, file+" "+api)
	}
	slices.Sort(out)
	return out
}

// fixture copies testdata/mod, a module whose sources are kept as
// *.go.txt (so that nothing else reads them as Go), into a temporary
// directory with their .go names, and returns its root.
func fixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir(filepath.Join("testdata", "mod"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(filepath.Join("testdata", "mod"), path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, strings.TrimSuffix(rel, ".txt"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// wantAll are the findings in testdata/mod with pmd and dispatch allowed.
var wantAll = []string{
	"dispatch/ring_cgo.go:9 dispatch.Ring.Pointer",
	// cgo and C sources above the boundary.
	"consumer/native_cgo.go:6 -",
	"consumer/native.h:0 -",
	// Imports in the wrong place.
	"pmd/helper.go:3 -",      // a boundary package, not a *_cgo.go file
	"pmd/helper_test.go:3 -", // tests too
	"roce/conn.go:3 -",       // not a boundary package
	"roce/dev_cgo.go:5 -",    // cgo outside the boundary, on another architecture
	// Exported API using unsafe.Pointer.
	"pmd/alias_cgo.go:6 pmd.Peek",
	"pmd/port_cgo.go:20 pmd.Port.Raw",
	"pmd/port_cgo.go:23 pmd.Open",
	"pmd/port_cgo.go:26 pmd.Handle",
	"pmd/port_cgo.go:35 pmd.Wrap",
	"pmd/port_cgo.go:41 pmd.Wraps",
	"pmd/port_cgo.go:50 pmd.Global",
	"pmd/port_cgo.go:53 pmd.Callback",
	"pmd/port_cgo.go:56 pmd.Source",
}

func TestCheck(t *testing.T) {
	root := fixture(t)
	fs, err := Check(Config{Root: root, Allow: []string{"pmd", "dispatch"}})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(wantAll)
	slices.Sort(want)
	if g := got(t, root, fs); !slices.Equal(g, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckMessages(t *testing.T) {
	fs, err := Check(Config{Root: fixture(t), Allow: []string{"pmd", "dispatch"}})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, f := range fs {
		text = append(text, f.String())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{
		`roce/conn.go:3:8: example.com/m/roce imports "unsafe": only the DPDK boundary packages may`,
		`pmd/helper.go:3:8: helper.go imports "unsafe" outside a *_cgo.go file`,
		`roce/dev_cgo.go:5:8: example.com/m/roce imports "C" (cgo): only the DPDK boundary packages may`,
		`pmd/port_cgo.go:23:1: pmd.Open: exported function signature uses unsafe.Pointer: give the boundary a typed handle`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no finding %q in\n%s", want, all)
		}
	}
}

// TestBoundary checks the fixture with the default boundary, pmd alone:
// dispatch's unsafe import, allowed above, is refused now, with
// consumer's cgo and C header.
func TestBoundary(t *testing.T) {
	root := fixture(t)
	fs, err := Check(Config{Root: root, Allow: boundary})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(wantAll), "dispatch/ring_cgo.go:3 -")
	slices.Sort(want)
	if g := got(t, root, fs); !slices.Equal(g, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	var text []string
	for _, f := range fs {
		text = append(text, f.String())
	}
	for _, want := range []string{
		`dispatch/ring_cgo.go:3:8: example.com/m/dispatch imports "unsafe": only the DPDK boundary packages may`,
		`consumer/native.h: example.com/m/consumer holds C source native.h: only the DPDK boundary packages may`,
	} {
		if !strings.Contains(strings.Join(text, "\n"), want) {
			t.Errorf("no finding %q in\n%s", want, strings.Join(text, "\n"))
		}
	}
}

func TestCheckErrors(t *testing.T) {
	if _, err := Check(Config{Root: t.TempDir()}); err == nil {
		t.Error("Check of a directory without go.mod succeeded")
	}
}

// TestModule runs the check on this module, as scripts/test.sh does.
func TestModule(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fs, err := Check(Config{Root: root, Allow: boundary})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Error(f)
	}
}
