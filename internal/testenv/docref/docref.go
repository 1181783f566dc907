// Package docref reads the documentation's reference tables, for the
// tests that hold them to the code (config keys and defaults, metrics): a
// number or a name in the documentation that a test can check should not
// drift. It also finds the relative links of Markdown files, for the test
// that checks they resolve.
package docref

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Row is one row of a Markdown table.
type Row struct {
	// Line is its 1-based line number in the file.
	Line int
	// Cells are its cells, trimmed, with "\|" unescaped.
	Cells []string
}

var (
	sep  = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)
	name = regexp.MustCompile("`([^`]+)`")
)

// Rows returns the body rows of every table in the Markdown file at path
// whose header's first cell is header (e.g. "key"), in file order.
func Rows(path, header string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	var rows []Row
	in := false
	for i, l := range lines {
		if !strings.HasPrefix(l, "|") {
			in = false
			continue
		}
		if sep.MatchString(l) {
			continue
		}
		cells := Cells(l)
		if !in && i+1 < len(lines) && sep.MatchString(lines[i+1]) {
			in = len(cells) > 0 && cells[0] == header
			continue
		}
		if in {
			rows = append(rows, Row{Line: i + 1, Cells: cells})
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s has no table whose first column is %q", path, header)
	}
	return rows, nil
}

// Cells splits a table line at its unescaped pipes. GitHub splits cells
// there even inside code spans, so a pipe in a cell must be written "\|".
func Cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// Code returns the code spans of a cell, in order.
func Code(cell string) []string {
	var out []string
	for _, m := range name.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Link is a relative link in a Markdown file.
type Link struct {
	File   string // the file it is in
	Line   int    // 1-based
	Target string // as written, anchor included
}

// Links returns the relative links ([text](target)) of the Markdown file
// at path, outside fenced code blocks; absolute URLs and mail links are
// left out.
func Links(path string) ([]Link, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Link
	fenced := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(l, -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			out = append(out, Link{File: path, Line: i + 1, Target: t})
		}
	}
	return out, nil
}

// Anchors returns the heading anchors GitHub gives the Markdown file at
// path: a heading lowercased, without punctuation (letters, digits,
// spaces, hyphens and underscores stay), spaces made hyphens, and a
// repeated one suffixed -1, -2….
func Anchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 0x7f && isLetter(r):
				a.WriteRune(r)
			}
		}
		s := a.String()
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out, nil
}

// isLetter reports whether a non-ASCII rune is a letter GitHub keeps in
// an anchor (accented Latin and the like), not a symbol such as ⇄.
func isLetter(r rune) bool {
	return r >= 0xc0 && r <= 0x24f
}

// MarkdownFiles returns README.md, deploy/README.md and every .md file
// under docs/ of the repository at root.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}
