package metrics

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/docref"
)

// declaredNames returns every metric name the package's collectors
// declare, read from their source: prometheus.NewDesc with a literal
// name, and the calls of each file's helper that prepends a prefix to its
// first argument (d := func(name, ...) { return prometheus.NewDesc("prefix_"+name, ...) }).
func declaredNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lit := func(e ast.Expr) (string, bool) {
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(b.Value)
		return s, err == nil
	}
	isNewDesc := func(c *ast.CallExpr) bool {
		sel, ok := c.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "NewDesc" && len(c.Args) > 0
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		helpers := map[string]string{} // helper's name: its prefix
		ast.Inspect(file, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
				return true
			}
			id, ok1 := as.Lhs[0].(*ast.Ident)
			fn, ok2 := as.Rhs[0].(*ast.FuncLit)
			if !ok1 || !ok2 {
				return true
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok && isNewDesc(c) {
					if bin, ok := c.Args[0].(*ast.BinaryExpr); ok && bin.Op == token.ADD {
						if p, ok := lit(bin.X); ok {
							helpers[id.Name] = p
						}
					}
				}
				return true
			})
			return true
		})
		ast.Inspect(file, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || len(c.Args) == 0 {
				return true
			}
			name, ok := lit(c.Args[0])
			if !ok {
				return true
			}
			if id, isIdent := c.Fun.(*ast.Ident); isIdent && helpers[id.Name] != "" {
				names = append(names, helpers[id.Name]+name)
			} else if isNewDesc(c) {
				names = append(names, name)
			}
			return true
		})
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// metricsTable is the metrics reference, relative to this package.
const metricsTable = "../../docs/reference/metrics.md"

// docMetrics returns the metric names of the metrics reference's tables
// (rows whose header is "metric"), as rows write them: a full name, then names that continue
// it from one of its underscores ("`cephdpdkd_port_rx_packets_total`,
// `_rx_bytes_total`"), each resolved against known.
func docMetrics(t *testing.T, known []string) (names, unresolved []string) {
	t.Helper()
	rows, err := docref.Rows(metricsTable, "metric")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		first := ""
		for _, k := range docref.Code(row.Cells[0]) {
			if !strings.HasPrefix(k, "_") {
				first = k
				names = append(names, k)
				continue
			}
			found := false
			for i := len(first) - 1; i > 0 && !found; i-- {
				if first[i] == '_' && first[:i]+k != first && slices.Contains(known, first[:i]+k) {
					names = append(names, first[:i]+k)
					found = true
				}
			}
			if !found {
				unresolved = append(unresolved, fmt.Sprintf("%s:%d: %s … %s", metricsTable, row.Line, first, k))
			}
		}
	}
	return names, unresolved
}

// The metrics reference lists every metric the collectors declare, and
// nothing else.
func TestMetricsTable(t *testing.T) {
	code := declaredNames(t)
	doc, unresolved := docMetrics(t, code)
	if len(code) < 50 || len(doc) < 50 {
		t.Fatalf("found %d metrics in the code and %d in %s", len(code), len(doc), metricsTable)
	}
	for _, u := range unresolved {
		t.Errorf("%s names no declared metric", u)
	}
	for _, n := range code {
		if !slices.Contains(doc, n) {
			t.Errorf("%s: metric %s is missing: add a row | `%s` | <type> | <labels> | <meaning> |", metricsTable, n, n)
		}
	}
	for _, n := range doc {
		if !slices.Contains(code, n) {
			t.Errorf("%s: metric %s is not one any collector declares: remove it", metricsTable, n)
		}
	}
}
