package daemonproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// Package is cephdpdkd's import path.
const Package = "github.com/cephdpdkd/cephdpdkd/cmd/cephdpdkd"

// Build builds the command at import path pkg into the file bin. By
// import path it builds from any directory of the module, as the tests
// that call it run in their package's.
func Build(ctx context.Context, pkg, bin string) error {
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// BuildDaemon builds cephdpdkd into t's temporary directory and returns
// its path; t fails if it does not build.
func BuildDaemon(t harness.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cephdpdkd")
	if err := Build(context.Background(), Package, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Binary is a command built once for all the tests of a package that run
// it, in a directory of its own that the package's TestMain removes.
type Binary struct {
	Pkg string // import path

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the command on its first call and returns its path; t fails
// if it does not build within 5 minutes.
func (b *Binary) Path(t harness.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "cdd-test-bin-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, path.Base(b.Pkg))
		// Bounded: a test that hangs here would say nothing until go
		// test's own timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.err = Build(ctx, b.Pkg, b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove removes what Path built.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
