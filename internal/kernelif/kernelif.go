//go:build linux

// Package kernelif configures the exception-path interface through
// netlink once DPDK has created it: it moves the interface into the
// node's network namespace if asked, and sets its MTU, addresses, link
// state and routes there. It also reads and puts back a NIC's addresses
// and routes when the daemon gives the NIC back. DPDK creates and
// destroys the interface; this package never creates or deletes links.
package kernelif

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config is what the interface should look like.
type Config struct {
	Name string
	// NetNS is a name under /run/netns or an absolute path to a namespace
	// file; empty keeps the interface where it is.
	NetNS string
	MTU   int
	// Network is the node's addresses and routes on the interface.
	Network Network
}

// NamespacePath resolves a configured namespace: a bare name is one made
// by `ip netns add`.
func NamespacePath(ns string) string {
	if ns == "" || filepath.IsAbs(ns) {
		return ns
	}
	return filepath.Join("/run/netns", ns)
}

// Interface is a configured exception-path interface.
type Interface struct {
	cfg   Config
	index int
}

// Setup moves the interface named cfg.Name from the caller's namespace to
// cfg.NetNS (when set), then sets the MTU, assigns the addresses, sets
// the link up and installs the routes there, and returns once no
// address is tentative: the node's network is usable then. An interface
// moved to another namespace goes down, so nothing is configured before
// the move.
func Setup(cfg Config) (*Interface, error) {
	cur, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("kernelif: netlink: %w", err)
	}
	defer cur.Close()
	link, err := cur.LinkByName(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("kernelif: interface %s: %w", cfg.Name, err)
	}
	h := cur
	if cfg.NetNS != "" {
		path := NamespacePath(cfg.NetNS)
		ns, err := netns.GetFromPath(path)
		if err != nil {
			return nil, fmt.Errorf("kernelif: network namespace %s: %w", path, err)
		}
		defer ns.Close()
		if err := cur.LinkSetNsFd(link, int(ns)); err != nil {
			return nil, fmt.Errorf("kernelif: move %s to %s: %w", cfg.Name, path, err)
		}
		if h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
			return nil, fmt.Errorf("kernelif: netlink in %s: %w", path, err)
		}
		defer h.Close()
		if link, err = h.LinkByName(cfg.Name); err != nil {
			return nil, fmt.Errorf("kernelif: %s after the move to %s: %w", cfg.Name, path, err)
		}
	}
	if cfg.MTU > 0 && link.Attrs().MTU != cfg.MTU {
		if err := h.LinkSetMTU(link, cfg.MTU); err != nil {
			return nil, fmt.Errorf("kernelif: %s MTU %d: %w", cfg.Name, cfg.MTU, err)
		}
	}
	if err := apply(h, link, cfg.Network); err != nil {
		return nil, err
	}
	return &Interface{cfg: cfg, index: link.Attrs().Index}, nil
}

// Foreign returns the addresses and routes on the interface that Setup
// did not put there: what a network manager that adopted the interface
// (it has the NIC's name and MAC) added. Only for an interface in the
// caller's namespace; nothing is reported for one moved elsewhere.
func (i *Interface) Foreign() (Network, error) {
	if i.cfg.NetNS != "" {
		return Network{}, nil
	}
	now, err := Read(i.cfg.Name)
	if err != nil {
		return Network{}, err
	}
	return now.Minus(i.cfg.Network.installed()), nil
}

// Index returns the interface index in its (final) namespace.
func (i *Interface) Index() int { return i.index }

// String describes where the interface lives.
func (i *Interface) String() string {
	var b strings.Builder
	b.WriteString(i.cfg.Name)
	if i.cfg.NetNS != "" {
		b.WriteString(" in netns " + i.cfg.NetNS)
	}
	return b.String()
}

// CheckNamespace reports a configured namespace that does not exist, so
// that the daemon fails before it creates anything.
func CheckNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	path := NamespacePath(ns)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("kernelif: network namespace %s does not exist (create it with `ip netns add`)", path)
		}
		return fmt.Errorf("kernelif: network namespace %s: %w", path, err)
	}
	return nil
}
