//go:build linux

package rxeguest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

// The first build installs qemu and downloads ~75 MB of packages.
const imageTimeout = 20 * time.Minute

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
	if err := qemuvm.CheckHost(); err != nil {
		return fmt.Errorf("rxeguest: %w", err)
	}
	v := variants[baseImage]
	if dir := os.Getenv(v.env); dir != "" {
		if err := qemuvm.CheckImage(dir); err != nil {
			return fmt.Errorf("rxeguest: %w", err)
		}
		if _, err := exec.LookPath(qemuvm.Binary); err != nil {
			return fmt.Errorf("rxeguest: %s is set but %w", v.env, err)
		}
		return nil
	}
	if _, err := qemuvm.FindScript(v.script); err != nil {
		return fmt.Errorf("rxeguest: %w", err)
	}
	if _, err := exec.LookPath(qemuvm.Binary); err != nil {
		if _, aerr := exec.LookPath("apt-get"); aerr != nil {
			return fmt.Errorf("rxeguest: no %s and no apt-get to install it", qemuvm.Binary)
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
		if err := qemuvm.CheckImage(dir); err != nil {
			return fmt.Errorf("rxeguest: %w", err)
		}
		return nil
	}
	if _, err := qemuvm.FindScript(v.script); err != nil {
		return fmt.Errorf("rxeguest: %w", err)
	}
	if _, err := exec.LookPath("rados"); err != nil {
		return fmt.Errorf("rxeguest: the Ceph guest image needs the host's rados (apt-get install ceph-common): %w", err)
	}
	return nil
}

// images builds each image at most once per test binary: the images are
// the only state the package shares between tests, and they never change
// after the first call.
var images = [...]func(context.Context) (qemuvm.Image, error){
	baseImage:        imageOnce(baseImage),
	cephImage:        imageOnce(cephImage),
	cephDaemonsImage: imageOnce(cephDaemonsImage),
}

func imageOnce(v variant) func(context.Context) (qemuvm.Image, error) {
	return qemuvm.ImageOnce(variants[v].script, variants[v].args, variants[v].env, imageTimeout)
}

// built holds the images BuildImage made, which Boot takes first.
var built [len(variants)]atomic.Pointer[qemuvm.Image]

// BuildImage builds, or takes from the cache, the image Boot boots with
// opts, and has later Boots in this process use it. Boot builds what it
// needs by itself; BuildImage is for a program that shows the build as a
// step of its own: unlike Boot's, the build stops when ctx ends.
func BuildImage(ctx context.Context, opts ...Option) (qemuvm.Image, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	v := variants[cfg.image]
	im, err := qemuvm.BuildImage(ctx, v.script, v.args, v.env)
	if err != nil {
		return qemuvm.Image{}, fmt.Errorf("rxeguest: %w", err)
	}
	built[cfg.image].Store(&im)
	return im, nil
}

// getImage waits for image v, or for ctx. A build abandoned by a caller
// whose ctx ended goes on for the next caller.
func getImage(ctx context.Context, v variant) (qemuvm.Image, error) {
	if im := built[v].Load(); im != nil {
		return *im, nil
	}
	im, err := images[v](ctx)
	if err != nil {
		return qemuvm.Image{}, fmt.Errorf("rxeguest: %w", err)
	}
	return im, nil
}
