package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// modulePrefix may be left off the package names of the allow-list.
const modulePrefix = "github.com/cephdpdkd/cephdpdkd/"

type allowKey struct{ pkg, test string }

// AllowList is the set of tests that may skip in a full run, each with
// the reason it may.
//
// The file has one entry a line: the package (its import path, with or
// without the module's prefix), the test's full name (a subtest as
// Parent/sub), and the reason, which is required. Blank lines and lines
// that begin with # are ignored.
type AllowList struct {
	reasons map[allowKey]string
}

// ParseAllow reads an allow-list.
func ParseAllow(r io.Reader) (*AllowList, error) {
	a := &AllowList{reasons: map[allowKey]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("line %d: want: package test reason", n)
		}
		k := a.key(f[0], f[1])
		if _, dup := a.reasons[k]; dup {
			return nil, fmt.Errorf("line %d: %s %s is listed twice", n, f[0], f[1])
		}
		a.reasons[k] = strings.Join(f[2:], " ")
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// ReadAllowFile reads the allow-list at path; an empty path is an empty
// list.
func ReadAllowFile(path string) (*AllowList, error) {
	if path == "" {
		return &AllowList{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ParseAllow(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

func (a *AllowList) key(pkg, test string) allowKey {
	return allowKey{strings.TrimPrefix(pkg, modulePrefix), test}
}

// Allows reports whether the test may skip.
func (a *AllowList) Allows(pkg, test string) bool {
	_, ok := a.reasons[a.key(pkg, test)]
	return ok
}

// Keys returns the entries in order.
func (a *AllowList) Keys() []allowKey {
	var ks []allowKey
	for k := range a.reasons {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(x, y allowKey) int {
		if c := strings.Compare(x.pkg, y.pkg); c != 0 {
			return c
		}
		return strings.Compare(x.test, y.test)
	})
	return ks
}
