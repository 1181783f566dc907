// Package afxdp takes a kernel interface for the af_xdp port mode, in
// which the kernel keeps the NIC and all of its traffic except the RoCEv2
// that the daemon terminates: it checks the interface (kind, receive
// queues), attaches the XDP program or finds the one a previous run left
// (internal/xdp), records the program's id in the run directory so that
// a foreign program is never taken for ours, holds a lock against a
// second daemon on the same interface, and gives the program back on
// request (restore-nic, a stop for good).
package afxdp
