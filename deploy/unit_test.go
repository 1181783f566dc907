package deploy

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

const (
	// maxExposure is systemd-analyze security's overall exposure of the
	// unit, as docs/operator/systemd.md states it (Hardening).
	maxExposure = 6.5

	unitFile   = "cephdpdkd@.service"
	binPath    = "/usr/bin/cephdpdkd"
	configPath = "/etc/cephdpdkd/%i.yaml"
)

// unit reads the unit file as key → values, in order.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q", unitFile, line)
		}
		u[k] = append(u[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// The unit and the daemon agree: the notify protocol the daemon speaks,
// the state directory nicbind and hugepages write (which must survive a
// stop for ExecStopPost), the commands and the configuration path.
func TestUnitAgreesWithDaemon(t *testing.T) {
	u := unit(t)
	for k, want := range map[string]string{
		"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure", "LimitMEMLOCK": "infinity",
		"RuntimeDirectoryPreserve": "yes",
	} {
		if got := strings.Join(u[k], " "); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	if wd, err := time.ParseDuration(strings.Join(u["WatchdogSec"], "")); err != nil || wd < 2*time.Second {
		t.Errorf("WatchdogSec=%v (%v): want a timeout of seconds; the daemon pings every half", u["WatchdogSec"], err)
	}
	var runDirs []string
	for _, v := range u["RuntimeDirectory"] {
		for _, d := range strings.Fields(v) {
			runDirs = append(runDirs, filepath.Join("/run", d))
		}
	}
	// One directory: systemd passes it as $RUNTIME_DIRECTORY, where the
	// EAL makes its own runtime directory (dpdk/PREFIX); with two, the
	// variable is a colon-separated list the EAL takes for a path.
	if len(runDirs) != 1 {
		t.Errorf("RuntimeDirectory= makes %q: want one directory, which the EAL's runtime directory goes under", runDirs)
	}
	for _, need := range []string{nicbind.DefaultRunDir, hugepages.DefaultRunDir} {
		if len(runDirs) == 0 || runDirs[0] != need {
			t.Errorf("RuntimeDirectory= makes %q, not %s", runDirs, need)
		}
	}
	for key, sub := range map[string]string{"ExecStartPre": "check-config " + configPath, "ExecStart": "run --config " + configPath,
		"ExecStopPost": "restore-nic --config " + configPath, "ExecReload": "reload --config " + configPath} {
		if len(u[key]) != 1 || !strings.HasPrefix(u[key][0], binPath+" "+sub) {
			t.Errorf("%s=%q, want %s %s", key, u[key], binPath, sub)
		}
	}
}

// daemonBin is cephdpdkd, built once for the tests that run it.
var daemonBin = daemonproc.Binary{Pkg: daemonproc.Package}

func TestMain(m *testing.M) {
	code := m.Run()
	daemonBin.Remove()
	os.Exit(code)
}

// privately runs a shell script in a private mount namespace, where it
// may mount over /usr/bin or /run without the machine seeing it.
func privately(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	harness.RequireCommands(t, "util-linux", "unshare")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"-m", "--propagation", "private", "sh", "-euc", script, "sh"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// withBinary puts the binary $1 at the unit's path, on an overlay of
// /usr/bin that only the private mount namespace sees.
const withBinary = `mount -t tmpfs tmpfs /mnt
mkdir /mnt/upper /mnt/work
mount -t overlay overlay -o lowerdir=/usr/bin,upperdir=/mnt/upper,workdir=/mnt/work /usr/bin
cp "$1" ` + binPath + "\n"

// systemd-analyze verify passes on an instance, with the real binary at
// the unit's path: every directive known, every command executable.
func TestUnitVerify(t *testing.T) {
	harness.RequireCommands(t, "apt-get install systemd", "systemd-analyze")
	bin := daemonBin.Path(t)
	dir := t.TempDir()
	unitText, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, unitFile), unitText, 0o644)
	os.Symlink(unitFile, filepath.Join(dir, "cephdpdkd@data0.service"))
	out, err := privately(t, withBinary+`
cd "$2"
systemd-analyze verify --man=no ./cephdpdkd@data0.service
echo "exposure: $(systemd-analyze security --offline=yes ./cephdpdkd@data0.service 2>&1 | tail -1)"`, bin, dir)
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "exposure: ") {
		t.Errorf("systemd-analyze verify printed warnings:\n%s", out)
	}
	t.Log(lines[len(lines)-1])
	// The exposure docs/operator/systemd.md states, which hardening may lower but
	// nothing may raise.
	if m := regexp.MustCompile(`exposure level for \S+: (\d+\.\d)`).FindStringSubmatch(out); m == nil {
		t.Errorf("no exposure level in systemd-analyze security's output:\n%s", out)
	} else if e, _ := strconv.ParseFloat(m[1], 64); e > maxExposure {
		t.Errorf("systemd-analyze security: exposure %s, above the %.1f docs/operator/systemd.md states", m[1], maxExposure)
	}

	// And it fails where it should: a directive systemd does not know.
	os.WriteFile(filepath.Join(dir, unitFile), []byte(strings.Replace(string(unitText), "NotifyAccess=main", "NotifyAccess=main\nWatchdogSecs=10", 1)), 0o644)
	out, _ = privately(t, withBinary+`
cd "$2"
systemd-analyze verify --man=no ./cephdpdkd@data0.service 2>&1 || true`, bin, dir)
	if !strings.Contains(out, "WatchdogSecs") {
		t.Errorf("verify of a unit with an unknown directive said:\n%s", out)
	}
}

// The unit's ExecStartPre and ExecStopPost command lines, run as systemd
// would for an instance (the binary and /etc/cephdpdkd are the test's):
// check-config accepts a good configuration without touching the
// machine, and restore-nic succeeds when nothing was bound, twice.
func TestUnitCommands(t *testing.T) {
	bin := daemonBin.Path(t)
	u := unit(t)
	cfgDir := t.TempDir()
	sample, err := os.ReadFile("../configs/cephdpdkd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(sample), "listen: 127.0.0.1:9477", `listen: "off"`, 1)
	if err := os.WriteFile(filepath.Join(cfgDir, "data0.yaml"), []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	line := func(key string) string {
		l := strings.Join(u[key], "")
		l = strings.ReplaceAll(l, binPath, bin)
		l = strings.ReplaceAll(l, "/etc/cephdpdkd/", cfgDir+"/")
		return strings.ReplaceAll(l, "%i", "data0")
	}
	// /run is a fresh tmpfs: restore-nic finds no state of the machine's.
	out, err := privately(t, `mount -t tmpfs tmpfs /run
echo "== pre"; $1
echo "== post"; $2
echo "== post again"; $2
echo "== run dir"; ls -A /run`, line("ExecStartPre"), line("ExecStopPost"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"== pre\n" + cfgDir + "/data0.yaml: ok\n",
		"== post\nrestore-nic: port sample: nothing to restore (no state file /run/cephdpdkd/sample.json)\n== post again\nrestore-nic: port sample: nothing to restore",
		"== run dir\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "== run dir\n") {
		t.Errorf("check-config or restore-nic wrote to /run:\n%s", out)
	}
}
