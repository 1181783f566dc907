package xdp

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"time"

	"github.com/cilium/ebpf"
	ebpflink "github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The names libxdp looks for to adopt an attached program as its own
// default program (libxdp 1.3's xsk.c), and the program's own maps.
const (
	ProgramName = "xsk_def_prog"
	socketMap   = "xsks_map"
	configMap   = "cdd_config"
	statsMap    = "cdd_stats"
	objectFile  = "obj/xdp_roce.o"
)

//go:embed obj
var objects embed.FS

// ErrNoObject means the binary was built without the compiled program.
var ErrNoObject = errors.New("xdp: this binary carries no XDP program: run scripts/build-bpf.sh before go build")

// Object returns the compiled program embedded in the binary.
func Object() ([]byte, error) {
	b, err := objects.ReadFile(objectFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoObject
	}
	return b, err
}

// NativeMaxMTU is the largest interface MTU on which the program, which
// is not frags-aware (no xdp.frags section), attaches natively: in the
// driver a frame must fit one page with the XDP headroom and the
// skb_shared_info after it. It is veth's limit (veth_xdp_set: PAGE_SIZE
// 4096 - XDP_PACKET_HEADROOM 256 - SKB_DATA_ALIGN(sizeof(struct
// skb_shared_info)) 320 - ETH_HLEN 14; "Peer MTU is too large to set
// XDP" above it), and about what NIC drivers allow without multi-buffer
// XDP. Generic mode, on the skb, takes any MTU.
const NativeMaxMTU = 4096 - 256 - 320 - 14

// Mode is how the program is attached to an interface.
type Mode int

const (
	// Native runs the program in the driver, before an skb exists: the
	// production choice on a NIC, which keeps GRO after XDP_PASS.
	Native Mode = iota + 1
	// Generic runs it on the skb (any interface): on a veth it keeps the
	// peer's GSO, which native mode makes the veth drop.
	Generic
)

var modeNames = [...]string{Native: "native", Generic: "generic"}

// ParseMode reads a mode's config name.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if name == s && name != "" {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("xdp: attach mode %q: want native or generic", s)
}

func (m Mode) String() string {
	if m > 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) flags() uint32 {
	if m == Generic {
		return unix.XDP_FLAGS_SKB_MODE
	}
	return unix.XDP_FLAGS_DRV_MODE
}

// Program is the loaded program and its maps.
type Program struct {
	prog                *ebpf.Program
	sockets, config, st *ebpf.Map
	id                  ebpf.ProgramID
}

// Open takes hold of an attached program by its id (from Attached), and
// checks that it is ours: its name and its maps. A foreign program is
// reported with ErrForeign.
func Open(id uint32) (*Program, error) {
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("xdp: program %d: %w", id, err)
	}
	p := &Program{prog: prog, id: ebpf.ProgramID(id)}
	if err := p.openMaps(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Program) openMaps() error {
	info, err := p.prog.Info()
	if err != nil {
		return fmt.Errorf("xdp: program %d: %w", p.id, err)
	}
	if info.Name != ProgramName {
		return &ForeignError{ID: uint32(p.id), Name: info.Name}
	}
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return fmt.Errorf("xdp: program %d: map %d: %w", p.id, mid, err)
		}
		mi, err := m.Info()
		if err != nil {
			m.Close()
			return fmt.Errorf("xdp: program %d: map %d: %w", p.id, mid, err)
		}
		switch mi.Name {
		case socketMap:
			p.sockets = m
		case configMap:
			p.config = m
		case statsMap:
			p.st = m
		default:
			m.Close()
		}
	}
	if p.sockets == nil || p.config == nil || p.st == nil {
		return &ForeignError{ID: uint32(p.id), Name: info.Name}
	}
	return nil
}

// ForeignError is an attached program that is not this daemon's.
type ForeignError struct {
	ID   uint32
	Name string
	// Unrecorded: cephdpdkd's program by its shape, but no record of the
	// run directory names it (another daemon's run directory, or a lost
	// record).
	Unrecorded bool
}

func (e *ForeignError) Error() string {
	if e.Unrecorded {
		return fmt.Sprintf("xdp: XDP program %d on the interface is cephdpdkd's by its shape, but this run directory does not record it (another daemon's run directory, or a lost record): it is not taken; if no daemon uses it, detach it with ip link set dev IFACE xdp off (xdpgeneric off for generic mode)", e.ID)
	}
	return fmt.Sprintf("xdp: another XDP program is attached (id %d, name %q): not cephdpdkd's, and it is not replaced; detach it first if it is unused", e.ID, e.Name)
}

// ID is the kernel's id of the program.
func (p *Program) ID() uint32 { return uint32(p.id) }

// Close releases the daemon's hold on the program; an attached program
// stays attached.
func (p *Program) Close() error {
	var errs []error
	if p.prog != nil {
		errs = append(errs, p.prog.Close())
	}
	for _, m := range []*ebpf.Map{p.sockets, p.config, p.st} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// SetAddress sets the RoCE address whose UDP 4791 is redirected.
func (p *Program) SetAddress(a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("xdp: RoCE address %s: the program takes IPv4 only", a)
	}
	b := a.As4()
	// The map holds the address as it stands in the IP header.
	v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	if err := p.config.Put(uint32(0), v); err != nil {
		return fmt.Errorf("xdp: setting the RoCE address: %w", err)
	}
	return nil
}

// Loader loads a BPF object and returns a descriptor of its program
// named prog and the program's id: the daemon's is pmd.LoadXDP (libbpf,
// whose loaded BTF libxdp needs).
type Loader func(object []byte, prog string) (fd int, id uint32, err error)

// Attach loads the object (Object's) with load and attaches its program
// to the interface in mode m, then takes hold of it as Open does. It
// refuses an interface that already has a program, naming it.
//
// With pin set (a path on a bpffs), the program is attached through a
// BPF link pinned there, not through netlink: a link outlives the
// process through its pin, and netlink cannot detach it, so DPDK's
// net_af_xdp, which detaches the interface's program when it closes the
// port, leaves it alone. Unpin detaches it.
func Attach(load Loader, object []byte, ifindex int, m Mode, pin string) (*Program, error) {
	iface, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, fmt.Errorf("xdp: interface %d: %w", ifindex, err)
	}
	name := iface.Attrs().Name
	fd, id, err := load(object, ProgramName)
	if err != nil {
		return nil, fmt.Errorf("xdp: loading for %s: %w", name, err)
	}
	if pin != "" {
		err = attachLink(fd, ifindex, m, pin)
	} else {
		err = netlink.LinkSetXdpFdWithFlags(iface, fd, unix.XDP_FLAGS_UPDATE_IF_NOEXIST|int(m.flags()))
		unix.Close(fd)
	}
	if err != nil {
		if a, aerr := Attached(ifindex); aerr == nil && a.ID != 0 && a.ID != id {
			return nil, fmt.Errorf("xdp: attaching to %s: program %d is attached (%s): %w", name, a.ID, a.Mode, err)
		}
		return nil, fmt.Errorf("xdp: attaching to %s in %s mode: %w", name, m, err)
	}
	p, err := Open(id)
	if err != nil {
		return nil, fmt.Errorf("xdp: attached to %s: %w", name, err)
	}
	return p, nil
}

// attachLink attaches the program fd (which it closes) through a link
// pinned at pin.
func attachLink(fd, ifindex int, m Mode, pin string) error {
	prog, err := ebpf.NewProgramFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	defer prog.Close()
	flags := ebpflink.XDPDriverMode
	if m == Generic {
		flags = ebpflink.XDPGenericMode
	}
	l, err := ebpflink.AttachXDP(ebpflink.XDPOptions{Program: prog, Interface: ifindex, Flags: flags})
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pinning the link at %s: %w", pin, err)
	}
	return nil
}

// Unpin removes the pin of a link Attach made, which detaches the
// program from ifindex once nothing else holds the link, and waits up to
// a second for that.
func Unpin(pin string, ifindex int) error {
	if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("xdp: %w", err)
	}
	for end := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		a, err := Attached(ifindex)
		if err != nil || a.ID == 0 {
			return nil // the interface, or its program, is gone
		}
		if time.Now().After(end) {
			return fmt.Errorf("xdp: program %d still attached after its link's pin %s was removed: another process holds the link", a.ID, pin)
		}
	}
}

// IsBPFFS reports whether dir is a BPF file system, where Attach can pin.
func IsBPFFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

// Attachment is what an interface has attached.
type Attachment struct {
	ID   uint32 // 0: none
	Mode Mode   // 0 for an offloaded or multi-attached program
}

// Attached reports the program attached to an interface.
func Attached(ifindex int) (Attachment, error) {
	link, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return Attachment{}, fmt.Errorf("xdp: interface %d: %w", ifindex, err)
	}
	x := link.Attrs().Xdp
	if x == nil || !x.Attached {
		return Attachment{}, nil
	}
	a := Attachment{ID: x.ProgId}
	switch x.AttachMode {
	case nl.XDP_ATTACHED_DRV:
		a.Mode = Native
	case nl.XDP_ATTACHED_SKB:
		a.Mode = Generic
	}
	return a, nil
}

// Detach removes the program attached in mode m from the interface.
func Detach(ifindex int, m Mode) error {
	link, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return fmt.Errorf("xdp: interface %d: %w", ifindex, err)
	}
	if err := netlink.LinkSetXdpFdWithFlags(link, -1, int(m.flags())); err != nil {
		return fmt.Errorf("xdp: detaching from %s: %w", link.Attrs().Name, err)
	}
	return nil
}
