package docref

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../../.."

// pending are documents other branches of issue 25 write and this tree's
// docs already link to. Each entry must go once its file exists (the test
// fails while both are true), so the list empties itself at the merge.
var pending = []string{}

// Every relative link of the READMEs and of docs/ names a file or directory
// of the repository, and its anchor, if any, a heading of that file.
func TestLinks(t *testing.T) {
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files under %s: the README and docs/ moved?", len(files), root)
	}
	for _, p := range pending {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s exists now: remove it from pending", p)
		}
	}
	checked := 0
	for _, f := range files {
		links, err := Links(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			checked++
			target, anchor, _ := strings.Cut(l.Target, "#")
			rel, _ := filepath.Rel(root, f)
			dest := f
			if target != "" {
				dest = filepath.Join(filepath.Dir(f), target)
			}
			destRel, _ := filepath.Rel(root, dest)
			if strings.HasPrefix(destRel, "..") {
				t.Errorf("%s:%d: %s leaves the repository", rel, l.Line, l.Target)
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				if !slices.Contains(pending, filepath.ToSlash(destRel)) {
					t.Errorf("%s:%d: %s: no such file (%s)", rel, l.Line, l.Target, destRel)
				}
				continue
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			anchors, err := Anchors(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors[anchor] {
				t.Errorf("%s:%d: %s: %s has no heading with anchor #%s", rel, l.Line, l.Target, destRel, anchor)
			}
		}
	}
	t.Logf("%d links in %d files", checked, len(files))
}

func TestCells(t *testing.T) {
	got := Cells("| `a` / `b` | `x\\|y` | |")
	want := []string{"`a` / `b`", "`x|y`", ""}
	if !slices.Equal(got, want) {
		t.Errorf("Cells = %q, want %q", got, want)
	}
}

func TestAnchors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.md")
	if err := os.WriteFile(p, []byte("# Title\n## RoCE⇄TCP bridge (Ceph's RoCE clients)\n```\n# not a heading\n```\n## Port modes: rebind or af_xdp\n## Title\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Anchors(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"title", "rocetcp-bridge-cephs-roce-clients", "port-modes-rebind-or-af_xdp", "title-1"} {
		if !a[w] {
			t.Errorf("no anchor %q in %v", w, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
}
