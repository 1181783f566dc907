//go:build linux

package qemuvm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Image is a guest's kernel and initramfs: vmlinuz and initrd.img in Dir.
type Image struct {
	Dir string
	// Took is how long the image script ran (0 for an image named by an
	// environment variable).
	Took time.Duration
}

// Kernel is the path of the guest kernel.
func (im Image) Kernel() string { return filepath.Join(im.Dir, "vmlinuz") }

// Initrd is the path of the guest initramfs.
func (im Image) Initrd() string { return filepath.Join(im.Dir, "initrd.img") }

// CheckImage reports whether dir holds a non-empty vmlinuz and initrd.img.
func CheckImage(dir string) error {
	for _, f := range []string{"vmlinuz", "initrd.img"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			return fmt.Errorf("image directory %s has no %s", dir, f)
		}
	}
	return nil
}

// FindScript locates an image script (a path relative to the module root)
// in the module holding this package: first upwards from the working
// directory (go test runs in the package directory), then relative to this
// source file.
func FindScript(script string) (string, error) {
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		dirs = append(dirs, filepath.Join(filepath.Dir(file), "..", "..", ".."))
	}
	for _, d := range dirs {
		p := filepath.Join(d, script)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found above the working directory", script)
}

// BuildImage runs an image script (found by FindScript) with args, or
// takes the directory environment variable env names when it is set. The
// script prints the image directory as its last line on standard output,
// and its progress on standard error, whose end an error carries. When
// ctx ends the script's whole process group gets SIGTERM.
func BuildImage(ctx context.Context, script string, args []string, env string) (Image, error) {
	if dir := os.Getenv(env); dir != "" {
		return Image{Dir: dir}, CheckImage(dir)
	}
	path, err := FindScript(script)
	if err != nil {
		return Image{}, err
	}
	start := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	// A process group of its own, all of which ctx's end stops: the
	// script's downloads and archivers too, not just bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return Image{}, fmt.Errorf("%s: %w\n%s", path, err, Tail(stderr.String(), 30))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if err := CheckImage(dir); err != nil {
		return Image{}, fmt.Errorf("%w (%s said %q)", err, script, dir)
	}
	return Image{Dir: dir, Took: time.Since(start)}, nil
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ImageOnce returns a function that runs BuildImage(script, args, env) on
// its first call, bounded by timeout, and returns that result to every
// call: an image never changes within a test binary. Each caller waits
// for the build or for its own ctx; a build a caller gave up on goes on
// for the next.
func ImageOnce(script string, args []string, env string, timeout time.Duration) func(context.Context) (Image, error) {
	build := sync.OnceValues(func() (Image, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return BuildImage(ctx, script, args, env)
	})
	return func(ctx context.Context) (Image, error) {
		type result struct {
			im  Image
			err error
		}
		done := make(chan result, 1)
		go func() {
			im, err := build()
			done <- result{im, err}
		}()
		select {
		case r := <-done:
			return r.im, r.err
		case <-ctx.Done():
			return Image{}, fmt.Errorf("waiting for the guest image: %w", ctx.Err())
		}
	}
}
