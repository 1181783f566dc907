// Package rxeguest boots Linux Soft-RoCE (rdma_rxe) peers in qemu guests for
// cephdpdkd's RoCE interop tests, and drives them from Go.
//
// The host kernel has no RDMA, so each peer is a small guest: Debian's 6.1
// kernel plus a busybox initramfs with rdma-core 44 (rdma_client/rdma_server,
// ucmatose, rping, cmtime, perftest, ibverbs-utils, iproute2's rdma and ip),
// built and cached by scripts/rxe-guest-image.sh. Guests run under TCG (no
// KVM), attach through a tap to a Linux bridge inside a network namespace of
// their own, and create rxe0 on eth0 at boot (GID index 1 is the IPv4 one).
// A test reaches the same bridge from the root namespace through a veth
// pair (Bridge.AddVeth), which is where DPDK's net_af_packet binds, so that
// a guest's rdma_cm tools can talk to cephdpdkd's userspace RoCE endpoint:
//
//	if err := rxeguest.Available(); err != nil {
//		t.Skip(err)
//	}
//	b := rxeguest.NewSwitch(t, netip.Prefix{}) // or an address for the namespace's kernel
//	hostIf, err := b.AddVeth(t)                // --vdev=net_af_packet0,iface=<hostIf>
//	g, err := rxeguest.Boot(ctx, t, b, "g1", netip.MustParsePrefix("10.77.0.11/24"))
//	out, code, err := g.Run(ctx, "time -p rdma_client -s 10.77.0.2") // our endpoint's address
//
// and the other way round, a guest serving while our endpoint connects:
//
//	srv, err := g.Start("rping -s -a 10.77.0.11 -v -C 10")
//	err = g.WaitListen(ctx, 7174)
//	... connect from cephdpdkd ...
//	code, err := srv.Wait(ctx)
//	out, err := srv.Output(ctx)
//
// rdma_cm ports of the tools: rdma_server, ucmatose and cmtime 7471, rping
// 7174, perftest (-R) 18515. Under TCG expect a few MB/s and milliseconds
// per connection: enough for correctness, not for speed.
//
// A guest's serial console is a shell wired to the test process through
// pipes: Guest.Run runs a command and returns its output and exit status,
// Guest.Start runs one in the background, and Guest.Log returns the whole
// console for failure messages. ParseTimeP, ParsePerftestBW and ParseCmtime
// turn the tools' output into figures. Files go through a host directory
// shared over virtio-9p (WithShare): Guest.WriteFile, CopyIn, ReadFile,
// CopyOut, and Guest.SHA256 checks one in the guest.
//
// WithCeph boots the Ceph client image instead (scripts/rxe-guest-ceph-image.sh
// appends the host's Debian rados, Ceph 16.2, to the base image): the test
// hands the guest a cluster's fsid, mon_host and keyring, and the client
// uses kernel TCP (CephTCP) or async+rdma in rdma_cm mode on rxe0
// (CephRDMA, see CephRDMASettings):
//
//	b := rxeguest.NewSwitch(t, netip.MustParsePrefix("10.77.0.1/24")) // the cluster's address
//	c := cephcluster.Start(t, cephcluster.Options{NetNS: b.NS, IP: b.Addr.Addr()})
//	g, err := rxeguest.Boot(ctx, t, b, "c1", netip.MustParsePrefix("10.77.0.11/24"), rxeguest.WithCeph())
//	cl, err := rxeguest.CephClientFromFiles(c.ConfPath(), c.KeyringPath(), rxeguest.CephTCP)
//	err = g.SetupCeph(ctx, cl)
//	out, code, err := g.Rados(ctx, "-p", c.Pool(), "put", "obj", "/tmp/obj")
//
// Everything the package creates (namespace, bridge, taps, veths, qemu
// processes, share directories) is removed by the test's cleanup; qemu also dies with the test
// binary (a namespace then stays behind, named NSPrefix*). It touches no
// interface it did not create, and addresses belong to the private bridge
// only (tests use 10.77.0.0/24).
//
// Setting CEPHDPDKD_RXE_IMAGE (CEPHDPDKD_RXE_CEPH_IMAGE for WithCeph) to a
// directory holding vmlinuz and initrd.img skips the image script;
// CEPHDPDKD_CACHE moves the scripts' cache (default /var/cache/cephdpdkd).
//
// It is for tests only, and needs root.
package rxeguest
