// Package layers writes down the module's import layers, which its test
// checks against the code with go list -deps: imports run one way, down
// (docs/architecture.md has the same table).
//
// A package not listed is in layer 0: plain Go that needs no DPDK (the
// header parsers, the classifier, the RoCE transport, configuration,
// metrics, and the like); it may import only other layer-0 packages.
// Package pmd is the one DPDK boundary: it alone holds cgo, C and
// go-dpdk, and of this module it imports only internal/devargs, a pure
// leaf.
package layers

// Layer is a rank and the packages (module-relative paths) it holds.
type Layer struct {
	Rank     int
	Name     string
	Packages []string
}

// Layers lists the layers, lowest first. A package may import packages
// of its own layer and lower ones, never a higher one.
var Layers = []Layer{
	{1, "the DPDK boundary: cgo, C, go-dpdk", []string{"pmd"}},
	{2, "plain Go over typed handles", []string{"mempool", "service"}},
	{3, "poll loops and lanes", []string{"dispatch"}},
	{4, "consumers", []string{"consumer"}},
	{5, "the RoCE node, test environments", []string{"internal/roced", "internal/testenv", "internal/testenv/rocenode"}},
	{6, "the data path from a config", []string{"internal/daemon"}},
	{7, "commands", []string{"cmd/cephdpdkd", "cmd/cephdpdk-dump", "internal/tools/tryceph"}},
}

// Boundary is the one package that may use cgo.
const Boundary = "pmd"

// BoundaryImports are the module's packages the boundary may import.
var BoundaryImports = []string{"internal/devargs"}
