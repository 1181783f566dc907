//go:build linux

package rxeguest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

const (
	qemuBinary = "qemu-system-x86_64"

	// The first build installs qemu and downloads ~75 MB of packages.
	imageTimeout = 20 * time.Minute
)

// variant is one of the guest images.
type variant int

const (
	baseImage        variant = iota // rdma-core tools
	cephImage                       // the same plus Ceph's rados client (WithCeph)
	cephDaemonsImage                // and ceph-mon, ceph-osd (the package's own tests)
)

// variants names each image's script, relative to the module root, its
// arguments, and the environment variable that names a prebuilt image
// directory instead.
var variants = [...]struct {
	script string
	args   []string
	env    string
}{
	baseImage:        {"scripts/rxe-guest-image.sh", nil, "CEPHDPDKD_RXE_IMAGE"},
	cephImage:        {"scripts/rxe-guest-ceph-image.sh", nil, "CEPHDPDKD_RXE_CEPH_IMAGE"},
	cephDaemonsImage: {"scripts/rxe-guest-ceph-image.sh", []string{"--daemons"}, "CEPHDPDKD_RXE_CEPH_DAEMONS_IMAGE"},
}

// Available reports why guests cannot be booted here, or nil when they can:
// the process is root, ip(8) and /dev/net/tun exist, and the image script
// is found and qemu is installed or installable (apt-get). Tests skip with
// the error's text.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("rxeguest: needs root (network namespaces, taps, apt-get)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("rxeguest: needs the ip command (iproute2): %w", err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("rxeguest: needs tap devices: %w", err)
	}
	v := variants[baseImage]
	if dir := os.Getenv(v.env); dir != "" {
		if err := checkImage(dir); err != nil {
			return err
		}
		if _, err := exec.LookPath(qemuBinary); err != nil {
			return fmt.Errorf("rxeguest: %s is set but %w", v.env, err)
		}
		return nil
	}
	if _, err := findScript(v.script); err != nil {
		return err
	}
	if _, err := exec.LookPath(qemuBinary); err != nil {
		if _, aerr := exec.LookPath("apt-get"); aerr != nil {
			return fmt.Errorf("rxeguest: no %s and no apt-get to install it", qemuBinary)
		}
	}
	return nil
}

func checkImage(dir string) error {
	for _, f := range []string{"vmlinuz", "initrd.img"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			return fmt.Errorf("rxeguest: image directory %s has no %s", dir, f)
		}
	}
	return nil
}

// CephAvailable reports why guests with the Ceph client (WithCeph) cannot
// be booted here, or nil when they can: what Available checks, and the
// host's rados (ceph-common), whose binaries the image copies, unless
// CEPHDPDKD_RXE_CEPH_IMAGE names a prebuilt image.
func CephAvailable() error {
	if err := Available(); err != nil {
		return err
	}
	v := variants[cephImage]
	if dir := os.Getenv(v.env); dir != "" {
		return checkImage(dir)
	}
	if _, err := findScript(v.script); err != nil {
		return err
	}
	if _, err := exec.LookPath("rados"); err != nil {
		return fmt.Errorf("rxeguest: the Ceph guest image needs the host's rados (apt-get install ceph-common): %w", err)
	}
	return nil
}

// findScript locates an image script (a path relative to the module root)
// in the module holding this package: first upwards from the working
// directory (go test runs in the package directory), then next to this
// source file.
func findScript(script string) (string, error) {
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
	return "", fmt.Errorf("rxeguest: %s not found above the working directory", script)
}

// image is the guest kernel and initramfs.
type image struct {
	dir  string        // holds vmlinuz and initrd.img
	took time.Duration // running the script (0 when CEPHDPDKD_RXE_IMAGE is set)
}

func (im image) kernel() string { return filepath.Join(im.dir, "vmlinuz") }
func (im image) initrd() string { return filepath.Join(im.dir, "initrd.img") }

// buildImage runs each image script at most once per test binary: the
// images are the only state the package shares between tests, and they
// never change after the first call.
var buildImage = [...]func() (image, error){
	baseImage:        sync.OnceValues(func() (image, error) { return build(baseImage) }),
	cephImage:        sync.OnceValues(func() (image, error) { return build(cephImage) }),
	cephDaemonsImage: sync.OnceValues(func() (image, error) { return build(cephDaemonsImage) }),
}

func build(v variant) (image, error) {
	if dir := os.Getenv(variants[v].env); dir != "" {
		return image{dir: dir}, checkImage(dir)
	}
	script, err := findScript(variants[v].script)
	if err != nil {
		return image{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), imageTimeout)
	defer cancel()
	start := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, variants[v].args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return image{}, fmt.Errorf("rxeguest: %s: %w\n%s", script, err, tail(stderr.String(), 30))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if err := checkImage(dir); err != nil {
		return image{}, fmt.Errorf("%w (script said %q)", err, dir)
	}
	return image{dir: dir, took: time.Since(start)}, nil
}

// getImage waits for buildImage[v], or for ctx. A build abandoned by a
// caller whose ctx ended goes on for the next caller.
func getImage(ctx context.Context, v variant) (image, error) {
	type result struct {
		im  image
		err error
	}
	done := make(chan result, 1)
	go func() {
		im, err := buildImage[v]()
		done <- result{im, err}
	}()
	select {
	case r := <-done:
		return r.im, r.err
	case <-ctx.Done():
		return image{}, fmt.Errorf("rxeguest: waiting for the guest image: %w", ctx.Err())
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
