package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/docref"
)

// configTable is the configuration reference, relative to this package.
const configTable = "../../docs/reference/config.md"

// keyPaths returns the YAML key paths of t's fields: a.b for a field of a
// nested struct, a[].b for one in a list of structs. Types that parse
// themselves (addresses, port ranges) are leaves.
func keyPaths(t reflect.Type, prefix string) []string {
	unmarshaler := reflect.TypeFor[yaml.Unmarshaler]()
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		ft := f.Type
		list := ""
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			if ft.Kind() == reflect.Slice {
				list = "[]"
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(unmarshaler) && ft.PkgPath() == t.PkgPath() {
			keys = append(keys, keyPaths(ft, path+list+".")...)
			continue
		}
		keys = append(keys, path)
	}
	return keys
}

// docRow is one key of the reference's tables: its default cell and the
// line it is on.
type docRow struct {
	key, def string
	line     int
}

// docKeys returns the keys of the reference's tables (rows whose header
// is "key"). "a.b" / "c" names a.b and a.c; "a[]" names every key of a's
// entries. A default cell split by " / " into as many parts as the row
// has keys gives each key its part.
func docKeys(t *testing.T) []docRow {
	t.Helper()
	rows, err := docref.Rows(configTable, "key")
	if err != nil {
		t.Fatal(err)
	}
	var out []docRow
	for _, r := range rows {
		if len(r.Cells) < 3 {
			t.Fatalf("%s:%d: a row of %d cells, want key | default | meaning", configTable, r.Line, len(r.Cells))
		}
		names := docref.Code(r.Cells[0])
		defs := strings.Split(r.Cells[1], " / ")
		for i, k := range names {
			if i > 0 && !strings.Contains(k, ".") {
				if j := strings.LastIndex(names[0], "."); j >= 0 {
					k = names[0][:j+1] + k
				}
			}
			def := r.Cells[1]
			if len(defs) == len(names) {
				def = defs[i]
			}
			out = append(out, docRow{key: k, def: strings.TrimSpace(def), line: r.Line})
		}
	}
	return out
}

// docVariants are minimal configurations, each with only the keys it
// must set, whose parsed values are the defaults the code applies: a
// rebind node with a kernel path, a RoCE bridge and 2M hugepages; the
// af_xdp mode; 1G hugepages. refused are keys the variant's mode refuses,
// whose values there are no defaults (the test checks they are refused).
var docVariants = []struct {
	name, yaml string
	refused    map[string]string
}{
	{name: "rebind", yaml: `
eal: {hugepages: {pages: 512, size: 2M}}
port: {name: p0, device: "0000:3b:00.0", bind: {driver: vfio-pci}}
services:
  - {name: other}
  - {name: mon, consumer: {type: kernel}}
  - {name: roce, consumer: {type: roce}}
default_service: other
rules:
  - {service: mon}
kernel: {addresses: [192.0.2.10/24]}
roce: {service: roce, address: 192.0.2.10, bridge: {}}
`},
	{name: "af_xdp", yaml: `
port: {name: p0, mode: af_xdp, af_xdp: {interface: eth9}}
services:
  - {name: other}
  - {name: roce, consumer: {type: roce}}
default_service: other
roce: {service: roce, address: 192.0.2.10}
`, refused: map[string]string{"port.device": "net_null0", "port.mtu": "1500", "port.promiscuous": "true"}},
	{name: "1G", yaml: `
eal: {hugepages: {pages: 2, size: 1G}}
port: {name: p0, device: net_null0}
services: [{name: other}]
default_service: other
`},
}

// nodeAt returns the YAML mapping value at a key path of doc (the first
// entry of a list), or nil.
func nodeAt(doc *yaml.Node, path string) (parent *yaml.Node, i int) {
	n := doc.Content[0]
	parts := strings.Split(path, ".")
	for pi, p := range parts {
		p, list := strings.CutSuffix(p, "[]")
		found := -1
		if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == p {
					found = j
				}
			}
		}
		if found < 0 {
			return nil, 0
		}
		if pi == len(parts)-1 {
			return n, found
		}
		n = n.Content[found+1]
		if list {
			if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
				return nil, 0
			}
			n = n.Content[0]
		}
	}
	return nil, 0
}

// valueAt returns the parsed value at a key path of c (the first entry
// of a list), dereferenced, or false when a pointer or list on the way is
// empty.
func valueAt(c *Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, p := range strings.Split(path, ".") {
		p, list := strings.CutSuffix(p, "[]")
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); n == p {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return v, false
		}
		if list {
			if v.Len() == 0 {
				return v, false
			}
			v = v.Index(0)
		}
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, true
}

// same compares a documented value with the code's, an empty list and
// none being the same.
func same(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && b.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

var (
	tmplKey = regexp.MustCompile(`<([a-z_.\[\]]+)>`)
	divKey  = regexp.MustCompile(`^([a-z_.]+)/(\d+)$`)
)

// matches reports whether the code span tok of a default cell stands for
// v in c: a key name (the default follows that key), a template with
// <key> in it, key/N, or a YAML literal of v's type.
func matches(c *Config, keys []string, tok string, v reflect.Value) bool {
	if slices.Contains(keys, tok) {
		w, ok := valueAt(c, tok)
		return ok && fmt.Sprint(w.Interface()) == fmt.Sprint(v.Interface())
	}
	if tmplKey.MatchString(tok) {
		s := tmplKey.ReplaceAllStringFunc(tok, func(m string) string {
			w, ok := valueAt(c, m[1:len(m)-1])
			if !ok {
				return m
			}
			return fmt.Sprint(w.Interface())
		})
		return s == fmt.Sprint(v.Interface())
	}
	if m := divKey.FindStringSubmatch(tok); m != nil && slices.Contains(keys, m[1]) {
		w, ok := valueAt(c, m[1])
		n, _ := strconv.Atoi(m[2])
		return ok && w.CanInt() && v.CanInt() && w.Int()/int64(n) == v.Int()
	}
	p := reflect.New(v.Type())
	if err := yaml.Unmarshal([]byte(tok), p.Interface()); err != nil {
		return false
	}
	return same(p.Elem(), v)
}

// The configuration reference names every key the parser takes, and no
// key it does not; a key it calls required is refused when missing; and
// every other key's default cell holds the default the parser applies,
// in each variant that has the key's section: a new setting cannot go
// undocumented, nor a removed one stay, nor a default change unnoticed.
func TestConfigTable(t *testing.T) {
	code := keyPaths(reflect.TypeFor[Config](), "")
	doc := docKeys(t)
	if len(code) < 50 || len(doc) < 50 {
		t.Fatalf("found %d keys in the code and %d in %s", len(code), len(doc), configTable)
	}
	aggregate := func(d string) bool { return strings.HasSuffix(d, "[]") }
	documented := func(k string) bool {
		return slices.ContainsFunc(doc, func(d docRow) bool {
			return k == d.key || aggregate(d.key) && strings.HasPrefix(k, d.key+".")
		})
	}
	for _, k := range code {
		if !documented(k) {
			t.Errorf("%s: key %s is missing: add a row | `%s` | <default> | <meaning> |", configTable, k, k)
		}
	}
	for _, d := range doc {
		if !slices.ContainsFunc(code, func(k string) bool { return k == d.key || strings.HasPrefix(k, d.key+".") }) {
			t.Errorf("%s:%d: key %s is not one the parser takes: remove the row", configTable, d.line, d.key)
		}
	}

	type parsed struct {
		name    string
		doc     yaml.Node
		c       *Config
		refused map[string]string
	}
	var vs []parsed
	for _, v := range docVariants {
		p := parsed{name: v.name, refused: v.refused}
		if err := yaml.Unmarshal([]byte(v.yaml), &p.doc); err != nil {
			t.Fatal(err)
		}
		c, err := Parse([]byte(v.yaml))
		if err != nil {
			t.Fatalf("variant %s: %v", v.name, err)
		}
		p.c = c
		for k, val := range v.refused {
			with := v.yaml + "\n# refused\n"
			with = strings.Replace(with, "port: {", "port: {"+strings.TrimPrefix(k, "port.")+": "+val+", ", 1)
			if _, err := Parse([]byte(with)); err == nil {
				t.Errorf("variant %s: %s: %s is taken, not refused", v.name, k, val)
			}
		}
		vs = append(vs, p)
	}

	for _, d := range doc {
		if aggregate(d.key) {
			continue // a list of structures, its default described in words
		}
		if strings.HasPrefix(d.def, "required") {
			checked := false
			for _, v := range vs {
				parent, i := nodeAt(&v.doc, d.key)
				if parent == nil {
					continue
				}
				k, val := parent.Content[i], parent.Content[i+1]
				parent.Content = slices.Delete(parent.Content, i, i+2)
				b, err := yaml.Marshal(&v.doc)
				parent.Content = slices.Insert(parent.Content, i, k, val)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Parse(b); err == nil {
					t.Errorf("%s:%d: key %s is documented as required, but variant %s parses without it", configTable, d.line, d.key, v.name)
				}
				checked = true
				break
			}
			if !checked {
				t.Errorf("%s:%d: key %s is documented as required, but no variant sets it: add it to docVariants", configTable, d.line, d.key)
			}
			continue
		}
		toks := docref.Code(d.def)
		for _, v := range vs {
			if p, _ := nodeAt(&v.doc, d.key); p != nil {
				continue // set by the variant: not a default
			}
			if _, ok := v.refused[d.key]; ok {
				continue
			}
			val, ok := valueAt(v.c, d.key)
			if !ok {
				continue // the variant has no such section
			}
			found := false
			for _, tok := range toks {
				found = found || matches(v.c, code, tok, val)
			}
			if !found && !(val.IsZero() && len(toks) == 0) {
				t.Errorf("%s:%d: key %s: the code's default is %s (variant %s); the default column says %q",
					configTable, d.line, d.key, show(val), v.name, d.def)
			}
		}
	}
}

// show prints a value as a default cell would.
func show(v reflect.Value) string {
	if v.IsZero() {
		return fmt.Sprintf("%v (empty: leave the column without code spans, or write it)", v.Interface())
	}
	b, err := yaml.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return "`" + strings.TrimSpace(string(b)) + "`"
}
