// Package testenv sets up what the project's tests need from the machine:
// one DPDK EAL per test binary, and network namespaces with veth pairs for
// tests that talk to kernel peers. Everything it creates is removed by the
// test's cleanup. It is for tests only.
package testenv
