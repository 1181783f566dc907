// Package sysguest boots a qemu guest whose PID 1 is systemd, with an
// emulated PCI NIC that DPDK can take, for the tests that need what this
// machine must not offer: a real systemd to run cephdpdkd's unit under,
// and a PCI NIC to rebind.
//
// The guest is a Debian 12 root file system in an initramfs (systemd,
// udev, iproute2, pciutils, ethtool, python3 and the dpdk package:
// dpdk-devbind.py, dpdk-testpmd, the net_e1000, net_virtio (and
// virtio_user), net_pcap, net_af_xdp and net_tap PMDs, libbpf and libxdp),
// built and cached by scripts/systemd-guest-image.sh, on Debian's 6.1
// kernel with the e1000, e1000e, virtio-net, tun, vhost_net,
// uio_pci_generic and vfio-pci modules (tun and vhost_net loaded at boot,
// for the exception path's two kernel drivers). It
// runs under TCG (no KVM), boots in about 15 s, and has its NIC (E1000 by
// default, or E1000E or Virtio) at PCI address NICAddr (interface ens5)
// on a tap of a qemuvm.Switch, where a qemuvm.Peer reaches it:
//
//	if err := sysguest.Available(); err != nil {
//		t.Skip(err)
//	}
//	b := qemuvm.NewSwitch(t, "cddsys-", "cddsyv", netip.Prefix{})
//	peer, err := b.AddPeer(t, netip.MustParsePrefix("10.99.0.1/24"))
//	g, err := sysguest.Boot(ctx, t, b, sysguest.Options{Hugepages: 128,
//		Files: []sysguest.File{{Path: "/usr/bin/cephdpdkd", Mode: 0o755, Data: bin}}})
//	out, err := g.RunOK(ctx, "systemctl start cephdpdkd@data0")
//
// The guest's console (ttyS0) carries the kernel's and systemd's messages,
// which Guest.Log returns; commands run in a root bash on its second
// serial port (ttyS1, a unix socket on this side), one at a time
// (Guest.Run). Files go in before boot (Options.Files: an archive appended
// to the initramfs) and come out with cat.
//
// Everything Boot creates (tap, qemu, the run's initramfs and socket) is
// removed by the test's cleanup; qemu also dies with the test binary.
// Setting CEPHDPDKD_SYSTEMD_IMAGE to a directory holding vmlinuz and
// initrd.img skips the image script; CEPHDPDKD_CACHE moves the script's
// cache (default /var/cache/cephdpdkd).
//
// It is for tests only, and needs root.
package sysguest
