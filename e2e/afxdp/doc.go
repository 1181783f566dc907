// Package afxdp holds the end-to-end tests of the af_xdp port mode: the
// daemon on a veth the kernel keeps, its XDP program, and RoCE to it
// from a peer namespace. Their names carry XDP, so that
// go test -run XDP ./e2e/... runs them with the mode's other tests.
package afxdp
