package afxdp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// Record is the run directory's note of the program a daemon attached.
type Record struct {
	Interface string `json:"interface"`
	Index     int    `json:"ifindex"`
	ProgramID uint32 `json:"program_id"`
	Mode      string `json:"mode"`
	// Pin is the bpffs path of the link that attaches the program, if
	// it was attached through one.
	Pin string `json:"pin,omitempty"`
}

func recordPath(dir, iface string) string { return statefile.Path(dir, iface, "xdp") }

// Take attaches the program (xdp.Object) to ifc in mode m, or takes back the one this
// daemon's earlier run left attached (reused), which keeps the NIC's
// rings untouched across a restart. With bpffs a BPF file system, the
// program is attached through a link pinned under it (PinPath), which
// DPDK's close of the port cannot detach: a clean stop keeps it too. An attached program that the run
// directory does not record as ours is refused with *xdp.ForeignError,
// never replaced; ours in another mode is refused too, since changing
// modes means detaching.
func Take(load xdp.Loader, dir, bpffs string, ifc Interface, m xdp.Mode) (p *xdp.Program, reused bool, err error) {
	a, err := xdp.Attached(ifc.Index)
	if err != nil {
		return nil, false, err
	}
	path := recordPath(dir, ifc.Name)
	var rec Record
	found, err := statefile.Read(path, &rec)
	if err != nil {
		return nil, false, err
	}
	if a.ID != 0 {
		if !found || rec.ProgramID != a.ID || rec.Index != ifc.Index {
			return nil, false, foreign(a.ID)
		}
		if a.Mode != m {
			return nil, false, fmt.Errorf("af_xdp: %s has cephdpdkd's program %d in %s mode, and the config asks for %s: run restore-nic to detach it first (a short outage on a NIC)", ifc.Name, a.ID, a.Mode, m)
		}
		p, err := xdp.Open(a.ID)
		if err != nil {
			return nil, false, err
		}
		return p, true, nil
	}
	object, err := xdp.Object()
	if err != nil {
		return nil, false, err
	}
	pin := ""
	if bpffs != "" && xdp.IsBPFFS(bpffs) {
		pin = PinPath(bpffs, ifc.Name)
		if err := os.MkdirAll(filepath.Dir(pin), 0o700); err != nil {
			return nil, false, fmt.Errorf("af_xdp: %w", err)
		}
		// A pin left by a run whose record is gone holds no program
		// of this interface's any more (none is attached).
		os.Remove(pin)
	}
	p, err = xdp.Attach(load, object, ifc.Index, m, pin)
	if err != nil {
		if m == xdp.Native && ifc.MTU > xdp.NativeMaxMTU {
			return nil, false, fmt.Errorf("%w (MTU %d: native XDP without multi-buffer support takes frames up to about a page; use attach: generic, or an MTU of at most %d)", err, ifc.MTU, xdp.NativeMaxMTU)
		}
		return nil, false, err
	}
	rec = Record{Interface: ifc.Name, Index: ifc.Index, ProgramID: p.ID(), Mode: m.String(), Pin: pin}
	if err := statefile.Write(path, rec); err != nil {
		p.Close()
		detach(rec, m)
		return nil, false, err
	}
	return p, false, nil
}

// PinPath is where Take pins the link of iface's program under bpffs.
func PinPath(bpffs, iface string) string {
	return filepath.Join(bpffs, "cephdpdkd", iface+"_xdp_link")
}

// detach removes the recorded program: through its link's pin, or
// through netlink.
func detach(rec Record, m xdp.Mode) error {
	if rec.Pin != "" {
		return xdp.Unpin(rec.Pin, rec.Index)
	}
	return xdp.Detach(rec.Index, m)
}

func foreign(id uint32) error {
	fe := &xdp.ForeignError{ID: id}
	if p, err := xdp.Open(id); err == nil {
		// Ours by its shape, but no run directory records it: a copy
		// from another run directory, or a lost record.
		p.Close()
		fe.Name, fe.Unrecorded = xdp.ProgramName, true
	} else {
		var oe *xdp.ForeignError
		if errors.As(err, &oe) {
			fe.Name = oe.Name
		}
	}
	return fe
}

// Release detaches the program this run directory records for iface and
// removes the record. It does nothing if there is no record, and refuses
// to detach a program that is not the recorded one.
func Release(dir, iface string) (released bool, err error) {
	path := recordPath(dir, iface)
	var rec Record
	found, err := statefile.Read(path, &rec)
	if err != nil || !found {
		return false, err
	}
	m, err := xdp.ParseMode(rec.Mode)
	if err != nil {
		return false, fmt.Errorf("af_xdp: %s: %w", path, err)
	}
	a, err := xdp.Attached(rec.Index)
	if err != nil {
		// The interface is gone: so is its program.
		if rec.Pin != "" {
			os.Remove(rec.Pin)
		}
		return false, os.Remove(path)
	}
	if a.ID != 0 {
		if a.ID != rec.ProgramID {
			return false, fmt.Errorf("af_xdp: %s has program %d attached, not cephdpdkd's recorded %d: left alone", iface, a.ID, rec.ProgramID)
		}
		if err := detach(rec, m); err != nil {
			return false, err
		}
	} else if rec.Pin != "" {
		os.Remove(rec.Pin)
	}
	return a.ID != 0, os.Remove(path)
}

// Lock holds the interface against a second daemon until the returned
// file is closed (or the process dies). A held lock is reported with the
// holder's pid.
func Lock(dir, iface string) (*os.File, error) {
	path := statefile.Path(dir, iface, "lock")
	if err := os.MkdirAll(statefile.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("af_xdp: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("af_xdp: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("af_xdp: interface %s is taken by another cephdpdkd (pid %s)", iface, strings.TrimSpace(string(b)))
		}
		return nil, fmt.Errorf("af_xdp: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// CheckAttached reports, reading only, a program attached to ifc that
// the run directory does not record as ours: Take would refuse it.
func CheckAttached(dir string, ifc Interface) error {
	a, err := xdp.Attached(ifc.Index)
	if err != nil || a.ID == 0 {
		return err
	}
	var rec Record
	found, err := statefile.Read(recordPath(dir, ifc.Name), &rec)
	if err != nil {
		return err
	}
	if !found || rec.ProgramID != a.ID || rec.Index != ifc.Index {
		return foreign(a.ID)
	}
	return nil
}
