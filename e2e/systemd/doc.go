// Package systemd is the end-to-end test of cephdpdkd as an operator runs
// it: deploy/cephdpdkd@.service under a real systemd (PID 1 of a qemu
// guest, internal/testenv/sysguest), on a real PCI NIC (an emulated e1000
// the daemon rebinds to uio_pci_generic at start and gives back to e1000
// at stop), with traffic from a peer namespace on the same bridge, and
// systemd restarting the daemon after kill -9 and after its watchdog
// fires on a stopped process; then with an exception path of
// kernel.driver virtio_user over the guest's /dev/vhost-net, through which
// the peer and the guest ping each other and echo 1 MiB of TCP both ways,
// in frames that fit the MTU (no offloads negotiated), with nothing
// dropped and every mbuf back at the stop. TestSystemdXDP runs the unit in the af_xdp
// mode on the same NIC, which keeps its kernel driver and address: the
// XDP program through start, RoCE from the peer, reload, SIGKILL and
// restart, and stop. TestSystemdRoutes runs a node's instance enabled at
// boot, whose exception path takes over the NIC's name with the node's
// addresses and routes (docs/operator/cutover.md): a host behind a
// gateway is reached through the daemon, through the restored NIC after
// a stop, and through the daemon again after a start, kill -9 and an
// in-place reboot, at whose boots a unit ordered like Ceph's starts after
// READY=1 and finds the node's network.
package systemd
