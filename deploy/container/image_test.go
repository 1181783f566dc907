package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
)

const (
	repoRoot = "../.."
	// examplesDir is where the Containerfile puts configs/cephdpdkd.yaml
	// and configs/examples.
	examplesDir = "/usr/share/cephdpdkd/examples"
)

// contextFiles are what the Containerfile copies from the repository, besides
// bin/cephdpdkd.
var contextFiles = []string{"deploy/container/packages.txt", "configs/cephdpdkd.yaml", "configs/examples"}

// podmanCmd runs podman with the test's settings: no systemd here to
// manage cgroups or take events, and runc, not crun, which refuses this
// machine's hybrid cgroup hierarchy whatever the flags ("cgroups in
// hybrid mode not supported, drop all controllers from cgroupv2").
func podmanCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "podman", append([]string{"--cgroup-manager=cgroupfs", "--events-backend=file", "--runtime=runc"}, args...)...)
}

// runFlags start every test container. This machine's root lacks
// CAP_SYS_RESOURCE, and podman sets RLIMIT_NOFILE and RLIMIT_NPROC to
// its defaults ("setrlimit RLIMIT_NOFILE: Operation not permitted", even
// with --ulimit=host), so the container gets this process's file limit
// and a process limit that is surely lower than the runtime's (4096: the
// daemon runs a few dozen threads). (runc, podmanCmd, cannot run a
// container without cgroups: it gets its own, cgroupfs, v1.)
var runFlags = func() []string {
	flags := []string{"run", "--rm", "--ulimit=nproc=4096:4096"}
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) == nil && r.Max != unix.RLIM_INFINITY {
		flags = append(flags, "--ulimit=nofile="+strconv.FormatUint(r.Max, 10)+":"+strconv.FormatUint(r.Max, 10))
	}
	return flags
}()

// podman runs podman and returns its output.
func podman(ctx context.Context, args ...string) (string, error) {
	out, err := podmanCmd(ctx, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// timed runs f and logs how long it took: the figures of a cold and a
// cached build.
func timed(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	t.Logf("%s: %.1f s", what, time.Since(start).Seconds())
}

// baseImage returns the cached base image, building it first if needed.
func baseImage(ctx context.Context, t *testing.T) string {
	t.Helper()
	var out []byte
	var err error
	timed(t, "base image (scripts/container-base-image.sh)", func() {
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts/container-base-image.sh"))
		var stderr logbuf.Buffer
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, stderr.String())
		}
	})
	if err != nil {
		t.Fatalf("container-base-image.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// buildImage builds the Containerfile on base, from a context holding a
// freshly built cephdpdkd and the files the Containerfile copies, laid
// out as in the repository; the image is removed when the test ends.
func buildImage(ctx context.Context, t *testing.T, base string) string {
	t.Helper()
	dir := t.TempDir()
	timed(t, "go build", func() {
		if err := daemonproc.Build(ctx, daemonproc.Package, filepath.Join(dir, "bin/cephdpdkd")); err != nil {
			t.Fatal(err)
		}
	})
	for _, f := range contextFiles {
		src, dst := filepath.Join(repoRoot, f), filepath.Join(dir, f)
		st, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() {
			err = os.CopyFS(dst, os.DirFS(src))
		} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	image := fmt.Sprintf("localhost/cephdpdkd-test:%d-%d", os.Getpid(), time.Now().UnixNano())
	var out string
	var err error
	timed(t, "podman build", func() {
		// --layers=false: no intermediate images left behind; with the
		// packages in the base, every step takes seconds.
		// --isolation=chroot: RUN steps without an OCI runtime, which
		// fails here on the cgroups (runFlags).
		out, err = podman(ctx, "build", "--isolation=chroot", "--layers=false", "-f", filepath.Join(repoRoot, "deploy/container/Containerfile"),
			"--build-arg", "BASE="+base, "-t", image, dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := podman(ctx, "rmi", "--force", image); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(out, "cephdpdkd dev") {
		t.Errorf("podman build did not run cephdpdkd --version:\n%s", out)
	}
	return image
}

// daemonRun starts a container running the daemon, waits until its poll
// loops run, checks with `cephdpdkd status` inside it that packets flow,
// stops it as podman stop and a pod's deletion do (SIGTERM), and returns
// its exit error and output.
func daemonRun(ctx context.Context, t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	var out logbuf.Buffer
	cmd := podmanCmd(ctx, append(append(runFlags, "--name", name), args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			podman(context.Background(), "rm", "--force", "--time", "0", name)
			<-done
		}
	}()

	ready := time.After(90 * time.Second)
	for !strings.Contains(out.String(), "poll loop started") {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("the container exited before its poll loop started: %v\n%s", err, out.String())
		case <-ready:
			t.Fatalf("no poll loop started in 90 s:\n%s", out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The status line from the metrics, in the container's network
	// namespace: the net_pcap replay's rate is far above zero.
	status, err := podman(ctx, "exec", name, binPath, "status", "--url", "http://127.0.0.1:9477/metrics")
	if err != nil {
		t.Error(err)
	} else if !regexp.MustCompile(`^rx [0-9.]+ [kM]pps`).MatchString(status) {
		t.Errorf("cephdpdkd status in the container: %q, want a receive rate in kpps or Mpps", status)
	}
	if _, err := podman(ctx, "stop", "--time", "30", name); err != nil {
		t.Error(err)
	}
	select {
	case err = <-done:
		stopped = true
	case <-time.After(60 * time.Second):
		t.Fatalf("podman run still running a minute after podman stop:\n%s", out.String())
	}
	return out.String(), err
}

// The image, built on the cached base, runs what the manifests run:
// check-config on every configuration it ships and the manifests carry,
// the init container's restore-nic, and the daemon (the image's default
// command, and the manifests' restore-then-run line) until SIGTERM, with
// traffic, a clean stop and no mbuf leak.
func TestImage(t *testing.T) {
	if testing.Short() {
		// The race step's -short run: the all-packages step runs it.
		t.Skip("builds and runs a container image")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("podman: %v (scripts/deps.sh installs it)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-30*time.Second))
	}
	defer cancel()
	image := buildImage(ctx, t, baseImage(ctx, t))

	// The manifests' configurations, each in a directory mounted where
	// they mount it.
	k, err := readKube([]byte(readFile(t, kubeFile)))
	if err != nil {
		t.Fatal(err)
	}
	cephadm, err := parseCephadm([]byte(readFile(t, cephadmFile)))
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := func(text string) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, filepath.Base(configPath)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	kubeCfg := cfgDir(k.configMap[filepath.Base(configPath)])
	cephadmCfg := cfgDir(cephadm.Spec.Files["CONFIG_DIR/"+filepath.Base(configPath)])
	mountCfg := func(d string) string { return d + ":" + filepath.Dir(configPath) + ":ro" }

	t.Run("check-config", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
		}{
			// Against the container, as the daemon will check it at start.
			{"shipped default", []string{image, "check-config", examplesDir + "/cephdpdkd.yaml"}},
			// For another machine: storage0 is not here.
			{"ConfigMap", []string{"-v", mountCfg(kubeCfg), image, "check-config", "--offline", configPath}},
			{"cephadm files", []string{"-v", mountCfg(cephadmCfg), image, "check-config", "--offline", configPath}},
		} {
			out, err := podman(ctx, append(append(runFlags, "--network=none"), tc.args...)...)
			if err != nil || !strings.Contains(out, ": ok\n") {
				t.Errorf("%s: %v\n%s", tc.name, err, out)
			}
		}
		// And it fails where it should: a configuration the daemon refuses.
		bad := cfgDir(strings.Replace(k.configMap[filepath.Base(configPath)], "main_lcore: 0", "main_lcore: 7", 1))
		out, err := podman(ctx, append(runFlags, "--network=none", "-v", mountCfg(bad), image, "check-config", "--offline", configPath)...)
		if err == nil || !strings.Contains(out, "main_lcore") {
			t.Errorf("check-config of a bad configuration: %v\n%s", err, out)
		}
	})

	t.Run("restore-nic", func(t *testing.T) {
		// The DaemonSet's init container, as it is written, with a run
		// directory of the test's: nothing recorded, nothing to do, and
		// nothing written.
		init := k.pod.InitContainers[0].Command
		runDir := t.TempDir()
		out, err := podman(ctx, append(append(runFlags, "--privileged", "--network=none", "-v", mountCfg(kubeCfg),
			"-v", runDir+":/run/cephdpdkd", "--entrypoint", init[0], image), init[1:]...)...)
		want := "restore-nic: port storage0: nothing to restore (no state file /run/cephdpdkd/storage0.json)\n"
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("init container: %v\n%s\nwant %q", err, out, want)
		}
		if ents, _ := os.ReadDir(runDir); len(ents) != 0 {
			t.Errorf("restore-nic wrote into the run directory: %v", ents)
		}
	})

	t.Run("run", func(t *testing.T) {
		// Privileged, as the manifests run it; no network, so that
		// nothing touches the machine's interfaces and the metrics port
		// is the container's own. The run directory is the test's: the
		// sample configuration binds nothing, so it stays empty.
		runDir := t.TempDir()
		common := []string{"--privileged", "--network=none", "-v", runDir + ":/run/cephdpdkd"}
		main := k.pod.Containers[0].Command
		for _, tc := range []struct {
			name string
			args []string
		}{
			// The image's default command: the embedded default
			// configuration, a net_pcap replay.
			{"default command", append(common, image)},
			// The manifests' restore-then-run line, on the shipped sample
			// configuration mounted where they mount theirs.
			{"manifest command", append(common, "-v", mountCfg(cfgDir(readFile(t, filepath.Join(repoRoot, "configs/cephdpdkd.yaml")))),
				"--entrypoint", main[0], image, main[1], main[2])},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := fmt.Sprintf("cdd-image-test-%d-%d", os.Getpid(), time.Now().UnixNano())
				var out string
				var err error
				timed(t, "podman run until poll loops, status, podman stop", func() { out, err = daemonRun(ctx, t, name, tc.args...) })
				if err != nil {
					t.Errorf("exit: %v\n%s", err, out)
				}
				for _, want := range []string{"shutting down", "terminated signal received", "all mbufs returned", "stopped cleanly"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %s:\n%s", want, out)
					}
				}
				if ents, _ := os.ReadDir(runDir); len(ents) != 0 {
					t.Errorf("the run wrote into the run directory: %v", ents)
				}
			})
		}
	})
}

// readFile returns a file's text.
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
