// Package config parses and validates a cephdpdkd configuration file.
//
// One file describes one NIC: how to start the EAL, which port to open,
// how large the mbuf pool is, which services own a ring, the rules that
// classify packets into those rings, and where metrics are served.
//
// Parsing is strict (unknown keys are errors) and every error names the
// line it comes from. Load and Validate touch no DPDK state, so
// `cephdpdkd check-config` runs them alone; the daemon turns the validated
// Config into live objects afterwards.
package config
