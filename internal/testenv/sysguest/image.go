//go:build linux

package sysguest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

const (
	imageScript = "scripts/systemd-guest-image.sh"
	// ImageEnv names a directory holding a prebuilt vmlinuz and
	// initrd.img, used instead of running the image script.
	ImageEnv = "CEPHDPDKD_SYSTEMD_IMAGE"

	// The first build installs mmdebstrap and qemu and downloads about
	// 100 MB of packages.
	imageTimeout = 20 * time.Minute
)

// Available reports why the guest cannot be booted here, or nil when it
// can: the process is root, ip(8) and /dev/net/tun exist, and the image
// script is found and qemu and mmdebstrap are installed or installable
// (apt-get), or ImageEnv names a prebuilt image. Tests skip with the
// error's text.
func Available() error {
	if err := qemuvm.CheckHost(); err != nil {
		return fmt.Errorf("sysguest: %w", err)
	}
	if dir := os.Getenv(ImageEnv); dir != "" {
		if err := qemuvm.CheckImage(dir); err != nil {
			return fmt.Errorf("sysguest: %s: %w", ImageEnv, err)
		}
	} else if _, err := qemuvm.FindScript(imageScript); err != nil {
		return fmt.Errorf("sysguest: %w", err)
	}
	for _, bin := range []string{qemuvm.Binary, "mmdebstrap"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, aerr := exec.LookPath("apt-get"); aerr != nil {
				return fmt.Errorf("sysguest: no %s and no apt-get to install it", bin)
			}
		}
	}
	return nil
}

var image = qemuvm.ImageOnce(imageScript, nil, ImageEnv, imageTimeout)

// Image returns the guest image, building it on the first call (which
// can take minutes on a machine without the cache; ctx bounds the wait,
// and an abandoned build goes on for the next caller).
func Image(ctx context.Context) (qemuvm.Image, error) {
	im, err := image(ctx)
	if err != nil {
		return qemuvm.Image{}, fmt.Errorf("sysguest: %w", err)
	}
	return im, nil
}

// writeInitrd writes the image's initramfs followed by an archive of files
// to dst. The kernel takes an uncompressed archive after a compressed one
// only at a 4-byte aligned offset: zeros fill the gap, which it skips.
func writeInitrd(dst string, im qemuvm.Image, files []File) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	in, err := os.Open(im.Initrd())
	if err != nil {
		out.Close()
		return err
	}
	n, err := io.Copy(out, in)
	in.Close()
	if err == nil {
		_, err = out.Write(make([]byte, (4-n%4)%4))
	}
	if err == nil {
		err = writeCPIO(out, files)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sysguest: initrd %s: %w", dst, err)
	}
	return nil
}
