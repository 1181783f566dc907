//go:build linux

package rxeguest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

// GuestShareDir is where a guest booted WithShare mounts Guest.ShareDir.
const GuestShareDir = "/mnt/host"

// shareTag is the virtio-9p mount tag of the share.
const shareTag = "cddshare"

// ErrNoShare reports a file transfer with a guest booted without
// WithShare.
var ErrNoShare = errors.New("guest has no share (boot it WithShare or WithCeph)")

// ShareDir is the host directory the guest sees at GuestShareDir, or ""
// without WithShare. A test may put files there for the guest's commands
// to read (rados put OBJ /mnt/host/FILE) and read what they write there.
// Names starting with ".xfer-" are the transfer methods'.
func (g *Guest) ShareDir() string { return g.shareDir }

// WriteFile writes data to file name in the guest (an absolute path; its
// directory is created), through the share.
func (g *Guest) WriteFile(ctx context.Context, name string, data []byte) error {
	return g.copyIn(ctx, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// CopyIn copies the host file src to file dst in the guest (an absolute
// path; its directory is created), through the share.
func (g *Guest) CopyIn(ctx context.Context, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("rxeguest: %s: %w", g.Name, err)
	}
	defer f.Close()
	return g.copyIn(ctx, dst, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
}

func (g *Guest) copyIn(ctx context.Context, dst string, write func(io.Writer) error) error {
	if err := g.checkTransfer(dst); err != nil {
		return err
	}
	tmp := g.xferName()
	host := filepath.Join(g.shareDir, tmp)
	defer os.Remove(host)
	f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("rxeguest: %s: %w", g.Name, err)
	}
	werr := write(f)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("rxeguest: %s: writing %s: %w", g.Name, host, werr)
	}
	// cp, not mv: dst is most likely on the guest's own tmpfs, and the
	// share's copy is removed above either way.
	cmd := fmt.Sprintf("mkdir -p %s && cp %s %s", qemuvm.ShellQuote(path.Dir(dst)),
		qemuvm.ShellQuote(path.Join(GuestShareDir, tmp)), qemuvm.ShellQuote(dst))
	return g.runOK(ctx, cmd)
}

// ReadFile returns the contents of file name in the guest, passed through
// the share.
func (g *Guest) ReadFile(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	err := g.copyOut(ctx, name, func(host string) error {
		var err error
		data, err = os.ReadFile(host)
		return err
	})
	return data, err
}

// CopyOut copies file src in the guest to the host file dst, through the
// share.
func (g *Guest) CopyOut(ctx context.Context, src, dst string) error {
	return g.copyOut(ctx, src, func(host string) error {
		// A rename would cross file systems as often as not.
		in, err := os.Open(host)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func (g *Guest) copyOut(ctx context.Context, src string, read func(host string) error) error {
	if err := g.checkTransfer(src); err != nil {
		return err
	}
	tmp := g.xferName()
	host := filepath.Join(g.shareDir, tmp)
	defer os.Remove(host)
	if err := g.runOK(ctx, fmt.Sprintf("cp %s %s", qemuvm.ShellQuote(src), qemuvm.ShellQuote(path.Join(GuestShareDir, tmp)))); err != nil {
		return err
	}
	if err := read(host); err != nil {
		return fmt.Errorf("rxeguest: %s: reading %s from the share: %w", g.Name, src, err)
	}
	return nil
}

func (g *Guest) checkTransfer(name string) error {
	if g.shareDir == "" {
		return fmt.Errorf("rxeguest: %s: %w", g.Name, ErrNoShare)
	}
	if !path.IsAbs(name) {
		return fmt.Errorf("rxeguest: %s: guest path %q is not absolute", g.Name, name)
	}
	return nil
}

func (g *Guest) xferName() string { return fmt.Sprintf(".xfer-%d", g.xfers.Add(1)) }

// SHA256 returns the hex SHA-256 of file name in the guest, computed there
// (busybox sha256sum): a large file need not cross the share to be checked.
func (g *Guest) SHA256(ctx context.Context, name string) (string, error) {
	out, code, err := g.Run(ctx, "sha256sum "+qemuvm.ShellQuote(name))
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if code != 0 || len(f) == 0 || len(f[0]) != 64 {
		return "", fmt.Errorf("rxeguest: %s: sha256sum %s: exit %d: %s", g.Name, name, code, strings.TrimSpace(out))
	}
	return f[0], nil
}

// runOK runs cmd and fails unless it exits 0.
func (g *Guest) runOK(ctx context.Context, cmd string) error {
	out, code, err := g.Run(ctx, cmd)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("rxeguest: %s: %s: exit %d: %s", g.Name, cmd, code, strings.TrimSpace(out))
	}
	return nil
}
