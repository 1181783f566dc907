package pkg

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const repo = "../.."

// installed is every path the package installs, as dpkg -L lists them
// (directories the root already has included): the binary in /usr/bin,
// the unit, the deploy files and examples under /usr/share/doc, and an
// empty /etc/cephdpdkd. Examples are added from configs/.
var installed = []string{
	"/.", "/etc", "/etc/cephdpdkd", "/lib", "/lib/systemd", "/lib/systemd/system",
	"/lib/systemd/system/cephdpdkd@.service",
	"/usr", "/usr/bin", "/usr/bin/cephdpdkd", "/usr/share", "/usr/share/doc",
	"/usr/share/doc/cephdpdkd", "/usr/share/doc/cephdpdkd/packages.txt",
	"/usr/share/doc/cephdpdkd/examples",
	"/usr/share/doc/cephdpdkd/grafana", "/usr/share/doc/cephdpdkd/grafana/cephdpdkd.json",
	"/usr/share/doc/cephdpdkd/prometheus", "/usr/share/doc/cephdpdkd/prometheus/cephdpdkd.rules.yml",
	"/usr/share/doc/cephdpdkd/prometheus/prometheus.yml",
}

// examples returns the example configurations the package must carry:
// configs/examples/*.yaml and the embedded default's file.
func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "configs/examples/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs/examples/*.yaml: %v", err)
	}
	names := []string{"cephdpdkd.yaml"}
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	return names
}

// runtimePackages returns deploy/container/packages.txt's packages.
func runtimePackages(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy/container/packages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if p := strings.TrimSpace(line); p != "" {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// command runs name with args and returns its stdout; it fails the test
// with stderr when the command fails.
func command(t *testing.T, ctx context.Context, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// lastLine is the last line a build script prints: its result.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// The package as built: its control fields, and the files it holds.
func checkDeb(t *testing.T, ctx context.Context, deb string) {
	t.Helper()
	fields := command(t, ctx, "dpkg-deb", "-f", deb, "Package", "Architecture", "Depends")
	t.Logf("control:\n%s", fields)
	for _, want := range []string{"Package: cephdpdkd\n", "Architecture: amd64\n", "librte-eal23 (>= 22.11)"} {
		if !strings.Contains(fields, want) {
			t.Errorf("control fields lack %q", want)
		}
	}
	_, depends, _ := strings.Cut(fields, "Depends: ")
	var deps []string
	for _, d := range strings.Split(strings.TrimSpace(depends), ",") {
		deps = append(deps, strings.Fields(d)[0])
	}
	// The PMD plugins are loaded by the EAL at start, which no linker
	// sees: they are dependencies only because packages.txt lists them.
	for _, p := range runtimePackages(t) {
		if !slices.Contains(deps, p) {
			t.Errorf("Depends lacks %s (deploy/container/packages.txt)", p)
		}
	}
}

// installScript unpacks the root tarball $1 into $2, installs the .deb
// $3 with apt-get (dependencies from the archive, downloads kept in $4),
// and prints, after a marker line each, what the checks read: dpkg -L,
// the binary's unresolved libraries, check-config --offline of every
// example, systemd-analyze verify of an instance, and a two-second run
// of the embedded default in a network namespace of its own. It runs in
// a private mount namespace: its mounts go with it.
const installScript = `set -eu
R=$2
tar -C "$R" -xf "$1"
cp /etc/resolv.conf "$R/etc/resolv.conf"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
mount -t proc proc "$R/proc"
mount --bind "$4" "$R/var/cache/apt/archives"
cp "$3" "$R/tmp/"
chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get -q -o APT::Sandbox::User=root \
	install -y --no-install-recommends "/tmp/${3##*/}" >&2
echo "== dpkg -L"
chroot "$R" dpkg -L cephdpdkd
echo "== not found"
chroot "$R" ldd /usr/bin/cephdpdkd | grep 'not found' || true
for f in "$R"/usr/share/doc/cephdpdkd/examples/*.yaml; do
	echo "== check-config ${f##*/}"
	chroot "$R" cephdpdkd check-config --offline "/usr/share/doc/cephdpdkd/examples/${f##*/}" 2>&1 | head -1
done
echo "== verify"
chroot "$R" systemd-analyze verify --man=no cephdpdkd@data0.service 2>&1
echo "== run"
unshare -n sh -c 'ip link set lo up && chroot "$1" cephdpdkd run --duration 2s --status=off' sh "$R" 2>&1 | grep -v '^EAL:' || true
echo "== end"
`

// sections splits the install script's output at its "== " marker lines.
func sections(out string) map[string]string {
	m := map[string]string{}
	key := ""
	for _, line := range strings.SplitAfter(out, "\n") {
		if k, ok := strings.CutPrefix(line, "== "); ok {
			key = strings.TrimSpace(k)
			m[key] = ""
			continue
		}
		m[key] += line
	}
	return m
}

// The package built from this tree, installed as an operator would
// (apt-get install ./cephdpdkd_*.deb) into a fresh Debian 12 root:
// its dependencies resolve from Debian's archive, its files are where
// they belong, check-config accepts every example it ships, the unit
// passes systemd-analyze verify there, and the daemon runs on the
// embedded default with nothing but the packages it depends on.
func TestDebianPackage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: chroot, mounts")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	start := time.Now()
	deb := lastLine(command(t, ctx, filepath.Join(repo, "scripts/build-deb.sh"), "-o", t.TempDir()))
	built := time.Since(start)
	checkDeb(t, ctx, deb)

	rootDir := lastLine(command(t, ctx, filepath.Join(repo, "scripts/deb-test-root.sh")))
	rooted := time.Since(start)
	root := t.TempDir()
	out := command(t, ctx, "unshare", "-m", "--propagation", "private", "sh", "-c", installScript, "sh",
		filepath.Join(rootDir, "root.tar"), root, deb, filepath.Join(filepath.Dir(rootDir), "archives"))
	t.Logf("package built in %v, root ready in %v, installed and checked in %v", built.Round(time.Second),
		(rooted - built).Round(time.Second), (time.Since(start) - rooted).Round(time.Second))
	s := sections(out)
	if _, ok := s["end"]; !ok {
		t.Fatalf("the install script stopped early:\n%s", out)
	}

	want := slices.Clone(installed)
	for _, e := range examples(t) {
		want = append(want, "/usr/share/doc/cephdpdkd/examples/"+e)
	}
	slices.Sort(want)
	got := strings.Fields(s["dpkg -L"])
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("dpkg -L cephdpdkd:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if entries, err := os.ReadDir(filepath.Join(root, "etc/cephdpdkd")); err != nil || len(entries) != 0 {
		t.Errorf("/etc/cephdpdkd after the install: %v %v; want an empty directory", entries, err)
	}
	if s["not found"] != "" {
		t.Errorf("the installed binary misses libraries:\n%s", s["not found"])
	}
	for _, e := range examples(t) {
		got, ok := s["check-config "+e]
		if want := "/usr/share/doc/cephdpdkd/examples/" + e + ": ok\n"; !ok || got != want {
			t.Errorf("check-config --offline %s: %q, want %q", e, got, want)
		}
	}
	if s["verify"] != "" {
		t.Errorf("systemd-analyze verify cephdpdkd@data0.service:\n%s", s["verify"])
	}
	for _, want := range []string{"driver=net_pcap", "all mbufs returned", "stopped cleanly"} {
		if !strings.Contains(s["run"], want) {
			t.Errorf("cephdpdkd run on the embedded default: no %q in\n%s", want, s["run"])
		}
	}
	t.Logf("the embedded default's run:\n%s", s["run"])
}
