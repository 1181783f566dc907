// Package docref reads the reference tables of the README, for the tests
// that hold them to the code (config keys, metrics): a number or a name
// in the documentation that a test can check should not drift.
package docref

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

var (
	row  = regexp.MustCompile("(?m)^\\| (`[^|]*`) \\|")
	name = regexp.MustCompile("`([^`]+)`")
)

// Names returns, for each table row in the section of the Markdown file
// at path that starts with the "## heading" line, the backquoted names of
// its first column, in order.
func Names(path, heading string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, s, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		return nil, fmt.Errorf("%s has no section %q", path, heading)
	}
	if i := strings.Index(s, "\n## "); i >= 0 {
		s = s[:i]
	}
	var rows [][]string
	for _, m := range row.FindAllStringSubmatch(s, -1) {
		var names []string
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			names = append(names, n[1])
		}
		rows = append(rows, names)
	}
	return rows, nil
}
