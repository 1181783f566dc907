package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/docref"
)

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

// readmeKeys returns the keys of the README's configuration reference: the
// first column of each table row between "## Configuration reference" and
// the next "## " heading. "a.b" / "c" names a.b and a.c; "a[]" names every
// key of a's entries.
func readmeKeys(t *testing.T) []string {
	t.Helper()
	rows, err := docref.Names("../../README.md", "Configuration reference")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, names := range rows {
		for i, k := range names {
			if i > 0 && !strings.Contains(k, ".") {
				if j := strings.LastIndex(names[0], "."); j >= 0 {
					k = names[0][:j+1] + k
				}
			}
			keys = append(keys, k)
		}
	}
	return keys
}

// The README's configuration reference names every key the parser takes,
// and no key it does not: a new setting cannot go undocumented, nor a
// removed one stay.
func TestREADMEConfigKeys(t *testing.T) {
	code := keyPaths(reflect.TypeFor[Config](), "")
	doc := readmeKeys(t)
	if len(code) < 50 || len(doc) < 50 {
		t.Fatalf("found %d keys in the code and %d in the README", len(code), len(doc))
	}
	documented := func(k string) bool {
		for _, d := range doc {
			if k == d || strings.HasSuffix(d, "[]") && strings.HasPrefix(k, d+".") {
				return true
			}
		}
		return false
	}
	for _, k := range code {
		if !documented(k) {
			t.Errorf("%s is not in the README's configuration reference", k)
		}
	}
	for _, d := range doc {
		if !slices.ContainsFunc(code, func(k string) bool { return k == d || strings.HasPrefix(k, d+".") }) {
			t.Errorf("the README documents %s, which the parser does not take", d)
		}
	}
}
