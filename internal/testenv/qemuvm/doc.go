// Package qemuvm holds what cephdpdkd's qemu test guests share, so that
// each guest package (rxeguest: Soft-RoCE peers; sysguest: a systemd
// machine with a PCI NIC) keeps only what makes it different:
//
//   - BuildImage runs a guest's image script (scripts/*-guest-image.sh),
//     which builds or takes from its cache a kernel and an initramfs;
//   - Start runs qemu inside a network namespace, in a process group of its
//     own that VM.Kill ends and that dies with the test binary, with
//     the guest's first serial port on its standard input and output;
//   - a Console collects what a serial port carries, for callers to wait on
//     and for failure messages;
//   - a Shell runs commands one at a time in a guest shell on a serial
//     port, and returns their output and exit status;
//   - a Switch is a Linux bridge alone in a network namespace: guests join
//     it through taps, the root namespace through veth pairs, and peer
//     namespaces (AddPeer) through others.
//
// Everything it creates is removed by the test's cleanup. It touches no
// interface it did not create. It is for tests only, and needs root.
package qemuvm
