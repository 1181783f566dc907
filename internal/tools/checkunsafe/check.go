package main

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A Finding is one breach of the rules.
type Finding struct {
	Pos token.Position
	// API names the exported identifier whose API uses unsafe.Pointer
	// (pkg.Name, pkg.Type.Method or pkg.Type.Field); empty for an import
	// in the wrong place.
	API string
	Msg string
}

func (f Finding) String() string { return fmt.Sprintf("%v: %s", f.Pos, f.Msg) }

// Config is what Check checks.
type Config struct {
	// Root is the module's root directory, holding go.mod.
	Root string
	// Allow lists the packages, as directories relative to Root in
	// slash form, whose *_cgo.go files may import "unsafe" and "C".
	Allow []string
}

// Check parses every Go file of the module under c.Root, build
// constraints ignored and testdata, vendor and hidden directories
// skipped, and returns the findings in file order. A package outside
// c.Allow may hold no C sources either (cgo would compile them into it).
func Check(c Config) ([]Finding, error) {
	mod, err := modulePath(filepath.Join(c.Root, "go.mod"))
	if err != nil {
		return nil, err
	}
	byDir := map[string][]string{} // package directory → its files
	cDir := map[string][]string{}  // directory → its C sources
	err = filepath.WalkDir(c.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != c.Root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			// A nested module is not this module's.
			if p != c.Root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go":
			byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], p)
		case ".c", ".h", ".S", ".cc", ".cpp":
			cDir[filepath.Dir(p)] = append(cDir[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkunsafe: walk %s: %w", c.Root, err)
	}
	var findings []Finding
	fset := token.NewFileSet()
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		rel, err := filepath.Rel(c.Root, dir)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		pkg := path.Join(mod, rel)
		allowed := slices.Contains(c.Allow, rel)
		var files []*ast.File
		for _, name := range byDir[dir] {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, fmt.Errorf("checkunsafe: %w", err)
			}
			findings = append(findings, checkImports(fset, f, filepath.Base(name), pkg, allowed)...)
			if !strings.HasSuffix(name, "_test.go") {
				files = append(files, f)
			}
		}
		findings = append(findings, checkAPI(fset, files, path.Base(pkg))...)
		if !allowed {
			// cgo compiles a package's C sources with it; a folder
			// without Go files (eBPF programs) is no package's.
			for _, name := range cDir[dir] {
				findings = append(findings, Finding{Pos: token.Position{Filename: name},
					Msg: fmt.Sprintf("%s holds C source %s: only the DPDK boundary packages may", pkg, filepath.Base(name))})
			}
		}
	}
	return findings, nil
}

// modulePath reads the module path from a go.mod file.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", fmt.Errorf("checkunsafe: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			if p, err := strconv.Unquote(strings.TrimSpace(rest)); err == nil {
				return p, nil
			}
			return strings.TrimSpace(rest), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("checkunsafe: %s: %w", gomod, err)
	}
	return "", fmt.Errorf("checkunsafe: %s: %w", gomod, errNoModule)
}

var errNoModule = errors.New("no module line")

// checkImports reports imports of "unsafe" and "C" outside the *_cgo.go
// files of allowed packages.
func checkImports(fset *token.FileSet, f *ast.File, base, pkg string, allowed bool) []Finding {
	var out []Finding
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != "unsafe" && p != "C" {
			continue
		}
		what := `"unsafe"`
		if p == "C" {
			what = `"C" (cgo)`
		}
		switch {
		case !allowed:
			out = append(out, Finding{Pos: fset.Position(imp.Pos()),
				Msg: fmt.Sprintf("%s imports %s: only the DPDK boundary packages may", pkg, what)})
		case !strings.HasSuffix(base, "_cgo.go"):
			out = append(out, Finding{Pos: fset.Position(imp.Pos()),
				Msg: fmt.Sprintf("%s imports %s outside a *_cgo.go file", base, what)})
		}
	}
	return out
}

// checkAPI reports the exported API of a package's (non-test) files that
// uses unsafe.Pointer: exported functions' and methods' parameters and
// results, exported types (for structs, their exported fields; for
// interfaces, their methods), and exported variables and constants,
// through any unexported type that is itself unsafe.Pointer or built
// from it without hiding it in a struct's unexported fields. name is the
// package's name, for Finding.API.
func checkAPI(fset *token.FileSet, files []*ast.File, name string) []Finding {
	// Unexported types that leak unsafe.Pointer when used in an exported
	// signature, found to a fixpoint since one may be built from another.
	leaky := map[string]bool{}
	var types []*ast.TypeSpec
	var fileOf []*ast.File
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					types = append(types, s.(*ast.TypeSpec))
					fileOf = append(fileOf, f)
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for i, ts := range types {
			if ts.Name.IsExported() || leaky[ts.Name.Name] {
				continue
			}
			if u := unsafeNames(fileOf[i]); uses(ts.Type, u, leaky) {
				leaky[ts.Name.Name] = true
				changed = true
			}
		}
	}

	var out []Finding
	report := func(n ast.Node, api, what string) {
		out = append(out, Finding{Pos: fset.Position(n.Pos()), API: api,
			Msg: fmt.Sprintf("%s: %s uses unsafe.Pointer: give the boundary a typed handle", api, what)})
	}
	for _, f := range files {
		u := unsafeNames(f)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				api := name + "." + d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					api = name + "." + recvName(d.Recv.List[0].Type) + "." + d.Name.Name
				}
				if uses(d.Type, u, leaky) {
					report(d, api, "exported function signature")
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && uses(s.Type, u, leaky) {
							report(s, name+"."+s.Name.Name, "exported type")
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() && s.Type != nil && uses(s.Type, u, leaky) {
								report(id, name+"."+id.Name, "exported variable or constant")
							}
						}
					}
				}
			}
		}
	}
	return out
}

// recvName returns the type name of a method receiver.
func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}

// unsafeNames returns the names under which f imports "unsafe" ("." for
// a dot import).
func unsafeNames(f *ast.File) []string {
	var names []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "unsafe" {
			n := "unsafe"
			if imp.Name != nil {
				n = imp.Name.Name
			}
			names = append(names, n)
		}
	}
	return names
}

// uses reports whether the type expression e, as seen from outside its
// package, exposes unsafe.Pointer (imported under one of the names u) or
// a leaky type. The unexported fields of a struct are not seen: holding
// a pointer in one is how a typed handle hides it.
func uses(e ast.Expr, u []string, leaky map[string]bool) bool {
	found := false
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && n.Sel.Name == "Pointer" && slices.Contains(u, x.Name) {
				found = true
			}
			return false
		case *ast.Ident:
			if leaky[n.Name] || n.Name == "Pointer" && slices.Contains(u, ".") {
				found = true
			}
		case *ast.StructType:
			for _, fl := range n.Fields.List {
				exported := len(fl.Names) == 0 // embedded: promoted
				for _, id := range fl.Names {
					exported = exported || id.IsExported()
				}
				if exported {
					ast.Inspect(fl.Type, visit)
				}
			}
			return false
		case *ast.FuncLit, *ast.BlockStmt:
			return false
		}
		return true
	}
	ast.Inspect(e, visit)
	return found
}
