package layers

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cephdpdkd/cephdpdkd"

// pkg is what go list says of one of the module's packages.
type pkg struct {
	path    string // module-relative
	imports []string
	cgo     int
}

// list runs go list -deps over the module from its root and returns its
// packages (not their tests), by module-relative path.
func list(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command:", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}} {{len .CgoFiles}}{{range .Imports}} {{.}}{{end}}{{end}}`, "./...")
	cmd.Dir = filepath.Join("..", "..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]pkg{}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		rel, ok := relative(f[0])
		if !ok {
			continue // another module's
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("go list: %q: %v", s.Text(), err)
		}
		p := pkg{path: rel, cgo: n}
		for _, imp := range f[2:] {
			if r, ok := relative(imp); ok {
				p.imports = append(p.imports, r)
			}
		}
		pkgs[rel] = p
	}
	if len(pkgs) == 0 || pkgs[Boundary].path == "" {
		t.Fatalf("go list found no package %s in:\n%s", Boundary, out)
	}
	return pkgs
}

func relative(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	return strings.CutPrefix(importPath, module+"/")
}

// rank returns a package's layer: listed, or 0.
func rank(path string) int {
	for _, l := range Layers {
		if slices.Contains(l.Packages, path) {
			return l.Rank
		}
	}
	return 0
}

// TestImportsRunDown checks that no package imports one of a higher
// layer.
func TestImportsRunDown(t *testing.T) {
	for _, p := range list(t) {
		for _, imp := range p.imports {
			if rank(imp) > rank(p.path) {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports run down (internal/tools/layers)", p.path, rank(p.path), imp, rank(imp))
			}
		}
	}
}

// TestOneBoundary checks that only the boundary has cgo files, and that
// it imports only its leaves, which import nothing of the module.
func TestOneBoundary(t *testing.T) {
	pkgs := list(t)
	for _, p := range pkgs {
		if p.cgo > 0 && p.path != Boundary {
			t.Errorf("%s has %d cgo files: only %s may", p.path, p.cgo, Boundary)
		}
	}
	for _, imp := range pkgs[Boundary].imports {
		if !slices.Contains(BoundaryImports, imp) {
			t.Errorf("%s imports %s: it may import only %v of this module", Boundary, imp, BoundaryImports)
		}
	}
	for _, leaf := range BoundaryImports {
		if imps := pkgs[leaf].imports; len(imps) > 0 {
			t.Errorf("%s, which %s imports, imports %v: it must be a leaf", leaf, Boundary, imps)
		}
	}
}

// TestLayersListReal checks that every package the layers name exists,
// so that a rename cannot leave the table describing nothing.
func TestLayersListReal(t *testing.T) {
	pkgs := list(t)
	for _, l := range Layers {
		for _, p := range l.Packages {
			if _, ok := pkgs[p]; !ok {
				t.Errorf("layer %d names %s, which go list does not find", l.Rank, p)
			}
		}
	}
}

// TestArchitectureTable checks docs/architecture.md's layer table against
// Layers: each layer's row names exactly its packages (the boundary's row
// may also name the leaves it imports).
func TestArchitectureTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n| layer | packages |\n")
	if !ok {
		t.Fatal("docs/architecture.md has no layer table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	row := regexp.MustCompile(`^\| (\d+) [^|]*\| (.*) \|$`)
	name := regexp.MustCompile("`([^`]+)`")
	rows := map[int][]string{}
	for _, l := range strings.Split(table, "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		for _, n := range name.FindAllStringSubmatch(m[2], -1) {
			rows[r] = append(rows[r], n[1])
		}
	}
	for _, l := range Layers {
		got := rows[l.Rank]
		for _, p := range l.Packages {
			if !slices.Contains(got, p) {
				t.Errorf("docs/architecture.md's layer %d does not name %s", l.Rank, p)
			}
		}
		for _, p := range got {
			if !slices.Contains(l.Packages, p) && !(l.Rank == 1 && slices.Contains(BoundaryImports, p)) {
				t.Errorf("docs/architecture.md's layer %d names %s, which Layers puts elsewhere", l.Rank, p)
			}
		}
	}
}
