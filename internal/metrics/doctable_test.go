package metrics

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/docref"
)

// declared returns every metric the package's collectors declare, with
// its variable labels, read from their source: prometheus.NewDesc with a
// literal name and a []string{...} of labels, and the calls of each
// file's helper that prepends a prefix to its first argument and may
// prepend labels to the rest
// (d := func(name, help string, labels ...string) { return prometheus.NewDesc("prefix_"+name, help, append([]string{"l"}, labels...), nil) }).
func declared(t *testing.T) map[string][]string {
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
	// vars are a file's local []string{...} of labels, passed as vars...
	var vars map[string][]string
	lits := func(es []ast.Expr) []string {
		var out []string
		for _, e := range es {
			if s, ok := lit(e); ok {
				out = append(out, s)
			} else if id, ok := e.(*ast.Ident); ok && vars[id.Name] != nil {
				out = append(out, vars[id.Name]...)
			} else {
				t.Fatalf("a label that is neither a string literal nor a local list of them: %#v", e)
			}
		}
		return out
	}
	// labelList reads NewDesc's labels argument: nil, []string{...}, or
	// append([]string{...}, labels...) in a helper.
	labelList := func(e ast.Expr) []string {
		switch e := e.(type) {
		case *ast.CompositeLit:
			return lits(e.Elts)
		case *ast.CallExpr:
			if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "append" && len(e.Args) == 2 {
				if cl, ok := e.Args[0].(*ast.CompositeLit); ok {
					return lits(cl.Elts)
				}
			}
		}
		return nil
	}
	isNewDesc := func(c *ast.CallExpr) bool {
		sel, ok := c.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "NewDesc" && len(c.Args) >= 3
	}
	type helper struct {
		prefix string
		labels []string // prepended to the call's own
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		helpers := map[string]helper{}
		vars = map[string][]string{}
		ast.Inspect(file, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
				return true
			}
			if id, ok := as.Lhs[0].(*ast.Ident); ok {
				if cl, ok := as.Rhs[0].(*ast.CompositeLit); ok {
					if at, ok := cl.Type.(*ast.ArrayType); ok {
						if el, ok := at.Elt.(*ast.Ident); ok && el.Name == "string" {
							vars[id.Name] = lits(cl.Elts)
						}
					}
				}
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
							helpers[id.Name] = helper{prefix: p, labels: labelList(c.Args[2])}
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
			if id, isIdent := c.Fun.(*ast.Ident); isIdent && helpers[id.Name].prefix != "" {
				h := helpers[id.Name]
				out[h.prefix+name] = append(slices.Clone(h.labels), lits(c.Args[2:])...)
			} else if isNewDesc(c) {
				out[name] = labelList(c.Args[2])
			}
			return true
		})
	}
	return out
}

// metricsTable is the metrics reference, relative to this package.
const metricsTable = "../../docs/reference/metrics.md"

// docMetric is a metric the reference names, with the labels its row gives.
type docMetric struct {
	name   string
	labels []string
	line   int
}

var parens = regexp.MustCompile(`\([^)]*\)`)

// docLabels reads a labels cell: names separated by commas, each perhaps
// followed by its values in parentheses ("reason (`a`, `b`)").
func docLabels(cell string) []string {
	var out []string
	for _, l := range strings.Split(parens.ReplaceAllString(cell, ""), ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// docMetrics returns the metrics of the reference's tables (rows whose
// header is "metric"), as rows write them: a full name, then names that
// continue it from one of its underscores ("`cephdpdkd_port_rx_packets_total`,
// `_rx_bytes_total`"), each resolved against known; every name of a row
// has the row's labels.
func docMetrics(t *testing.T, known []string) (metrics []docMetric, unresolved []string) {
	t.Helper()
	rows, err := docref.Rows(metricsTable, "metric")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if len(row.Cells) < 4 {
			t.Fatalf("%s:%d: a row of %d cells, want metric | type | labels | meaning", metricsTable, row.Line, len(row.Cells))
		}
		labels := docLabels(row.Cells[2])
		first := ""
		for _, k := range docref.Code(row.Cells[0]) {
			if !strings.HasPrefix(k, "_") {
				first = k
				metrics = append(metrics, docMetric{k, labels, row.Line})
				continue
			}
			found := false
			for i := len(first) - 1; i > 0 && !found; i-- {
				if first[i] == '_' && first[:i]+k != first && slices.Contains(known, first[:i]+k) {
					metrics = append(metrics, docMetric{first[:i] + k, labels, row.Line})
					found = true
				}
			}
			if !found {
				unresolved = append(unresolved, fmt.Sprintf("%s:%d: %s … %s", metricsTable, row.Line, first, k))
			}
		}
	}
	return metrics, unresolved
}

// The metrics reference lists every metric the collectors declare, with
// the labels they declare, and nothing else.
func TestMetricsTable(t *testing.T) {
	decl := declared(t)
	code := slices.Sorted(maps.Keys(decl))
	doc, unresolved := docMetrics(t, code)
	if len(code) < 50 || len(doc) < 50 {
		t.Fatalf("found %d metrics in the code and %d in %s", len(code), len(doc), metricsTable)
	}
	for _, u := range unresolved {
		t.Errorf("%s names no declared metric", u)
	}
	for _, n := range code {
		if !slices.ContainsFunc(doc, func(d docMetric) bool { return d.name == n }) {
			t.Errorf("%s: metric %s is missing: add a row | `%s` | <type> | %s | <meaning> |", metricsTable, n, n, strings.Join(decl[n], ", "))
		}
	}
	for _, d := range doc {
		labels, ok := decl[d.name]
		switch {
		case !ok:
			t.Errorf("%s:%d: metric %s is not one any collector declares: remove it", metricsTable, d.line, d.name)
		case !slices.Equal(slices.Sorted(slices.Values(labels)), slices.Sorted(slices.Values(d.labels))):
			t.Errorf("%s:%d: metric %s: the code's labels are %q, the labels column says %q", metricsTable, d.line, d.name, labels, d.labels)
		}
	}
}
