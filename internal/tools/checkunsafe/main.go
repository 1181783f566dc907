// Command checkunsafe enforces the DPDK boundary, in the way gVisor's
// checkunsafe analyzer does: only the boundary package, pmd, may import
// "unsafe" or "C", only in its *_cgo.go files, and only it may hold C
// sources (.c, .h: a folder without Go files, such as eBPF programs',
// is no package's); and no package's exported API (exported functions'
// and methods' parameters and results, exported types and their exported
// fields, exported variables) may use unsafe.Pointer, so that what
// crosses the boundary is a typed handle.
//
// Usage:
//
//	checkunsafe [-allow pmd] [module-root]
//
// It parses every Go file of the module, whatever its build constraints
// (so a file built only on another architecture is checked too), and
// prints one line per finding and exits 1 if there are any. scripts/test.sh
// runs it next to gofmt and go vet.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// boundary lists the packages that hold cgo and unsafe: the one DPDK
// boundary.
var boundary = []string{"pmd"}

func main() {
	allow := flag.String("allow", strings.Join(boundary, ","), "comma-separated `packages` (directories under the module root) whose *_cgo.go files may import unsafe and C")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: checkunsafe [-allow packages] [module-root]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	root := "."
	switch flag.NArg() {
	case 0:
	case 1:
		root = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	findings, err := Check(Config{Root: root, Allow: strings.Split(*allow, ",")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, f := range findings {
		fmt.Fprintln(os.Stderr, f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(os.Stderr, "checkunsafe: %d findings\n", len(findings))
		os.Exit(1)
	}
}
