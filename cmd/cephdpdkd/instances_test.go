package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config compares a file with the machine's other instances
// (--instances DIR): a copy left unedited fails on everything two
// daemons cannot share, a copy with its own port name, prefix and
// metrics port passes, and a broken neighbour is reported but does not
// fail this instance's start.
func TestCheckConfigInstances(t *testing.T) {
	sample, err := os.ReadFile("../../configs/cephdpdkd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("first.yaml", string(sample))
	code, out, errOut := runCLI("check-config", "--instances", dir, first)
	if code != 0 || !strings.HasSuffix(out, "instances: no clash with the 0 other(s) in "+dir+"\n") {
		t.Fatalf("alone: exit %d\n%s%s", code, out, errOut)
	}

	copied := write("copy.yaml", string(sample))
	code, out, errOut = runCLI("check-config", "--instances", dir, copied)
	for _, want := range []string{
		"config " + copied + ": clashes with another instance on this machine:",
		"eal.file_prefix cephdpdkd-sample is also " + first + "'s",
		"metrics.listen 127.0.0.1:9477 is also " + first + "'s: a port no instance uses: 127.0.0.1:9478",
		"poll loop lcore 1 is also " + first + "'s",
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("an unedited copy: exit %d, want 1 and %q in\n%s%s", code, want, out, errOut)
		}
	}
	// --offline checks for another machine, whose instances are not these.
	if code, out, errOut = runCLI("check-config", "--offline", "--instances", dir, copied); code != 0 {
		t.Errorf("--offline: exit %d\n%s%s", code, out, errOut)
	}

	// Its poll loop on lcore 0, the first's main lcore, and its main
	// lcore 1: a 2-CPU machine holds both.
	second := strings.NewReplacer("name: sample", "name: second", "file_prefix: cephdpdkd-sample", "file_prefix: cephdpdkd-second",
		"127.0.0.1:9477", "127.0.0.1:9478", "main_lcore: 0", "main_lcore: 1").Replace(string(sample))
	write("copy.yaml", second)
	write("broken.yaml", "port: {name: [\n")
	code, out, errOut = runCLI("check-config", "--instances", dir, copied)
	if code != 0 || !strings.HasSuffix(out, "instances: no clash with the 1 other(s) in "+dir+"\n") ||
		!strings.Contains(errOut, "instance "+filepath.Join(dir, "broken.yaml")+" left out of the comparison") {
		t.Errorf("a second instance done right, a broken neighbour: exit %d\n%s%s", code, out, errOut)
	}
}
