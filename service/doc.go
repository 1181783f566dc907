// Package service is what a service process imports: it joins a running
// cephdpdkd as a DPDK secondary process (Join), attaches to one of its
// process services (Attach), receives the service's packets zero-copy,
// forwards them and sends frames of its own (Session).
//
// The package is plain Go. The secondary EAL is pmd.InitEAL with
// Secondary set, and the shared-memory protocol with the daemon's side
// (consumer.Process) is package pmd's svcctl.h, with the process's steps
// in svcproc.c behind pmd.ProcessSession: no part of the attach needed to
// stay here.
package service
