package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
)

const (
	kubeFile    = "kubernetes.yaml"
	cephadmFile = "cephadm.yaml"

	// binPath is where the Containerfile puts the daemon.
	binPath = "/usr/local/bin/cephdpdkd"
	// configPath is where both manifests mount the configuration.
	configPath = "/etc/cephdpdkd/cephdpdkd.yaml"
	// nodeLabel selects the nodes with a dedicated storage NIC.
	nodeLabel = "cephdpdkd.io/storage-nic"
)

// restoreThenRun is the main container's shell line in both manifests:
// restore-nic before every start (a crashed container restarts without
// its pod's init containers, or under cephadm without any), then the
// daemon in the shell's place, so that SIGTERM reaches it. runDir is
// where the container sees the host's /run/cephdpdkd, when not there.
func restoreThenRun(runDir string) string {
	flag := ""
	if runDir != "" {
		flag = " --run-dir " + runDir
	}
	return fmt.Sprintf("%s restore-nic --config %s%s --keep-xdp && exec %s run --config %s%s --status=off",
		binPath, configPath, flag, binPath, configPath, flag)
}

// cephadmHostRun is where the cephadm container sees the host's /run:
// podman binds only sources that exist, and /run/cephdpdkd need not.
const cephadmHostRun = "/run/host"

// pod is the part of a DaemonSet's pod template the test checks.
type pod struct {
	HostNetwork    bool              `yaml:"hostNetwork"`
	NodeSelector   map[string]string `yaml:"nodeSelector"`
	InitContainers []podContainer    `yaml:"initContainers"`
	Containers     []podContainer    `yaml:"containers"`
	Volumes        []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		HostPath *struct {
			Path string `yaml:"path"`
			Type string `yaml:"type"`
		} `yaml:"hostPath"`
		EmptyDir *struct {
			Medium string `yaml:"medium"`
		} `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type podContainer struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	Command         []string `yaml:"command"`
	SecurityContext struct {
		Privileged bool `yaml:"privileged"`
	} `yaml:"securityContext"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// kube is kubernetes.yaml: its ConfigMap and its DaemonSet's pod.
type kube struct {
	configMapName string
	configMap     map[string]string
	pod           pod
}

// readKube parses kubernetes.yaml, a stream of documents.
func readKube(b []byte) (*kube, error) {
	var k kube
	kinds := map[string]int{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Data map[string]string `yaml:"data"`
			Spec struct {
				Template struct {
					Spec pod `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kubeFile, err)
		}
		kinds[doc.Kind]++
		switch doc.Kind {
		case "ConfigMap":
			k.configMapName, k.configMap = doc.Metadata.Name, doc.Data
		case "DaemonSet":
			k.pod = doc.Spec.Template.Spec
		}
	}
	if kinds["ConfigMap"] != 1 || kinds["DaemonSet"] != 1 {
		return nil, fmt.Errorf("%s: documents %v, want one ConfigMap and one DaemonSet", kubeFile, kinds)
	}
	return &k, nil
}

// mounts returns a container's mount paths by volume name.
func (c podContainer) mounts() map[string]string {
	m := map[string]string{}
	for _, v := range c.VolumeMounts {
		m[v.Name] = v.MountPath
	}
	return m
}

// checkSafeConfig validates a manifest's configuration with the daemon's
// own validation and checks that it cannot take a node off the network:
// the af_xdp mode, in which the kernel keeps the NIC, and no rebinding.
func checkSafeConfig(what, text string) (*config.Config, error) {
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if cfg.Port.Bind != nil {
		return nil, fmt.Errorf("%s: port.bind rebinds the NIC: the shipped default must not", what)
	}
	if !cfg.Port.IsAFXDP() {
		return nil, fmt.Errorf("%s: port.mode %q: want af_xdp, which leaves the NIC and the node's traffic to the kernel", what, cfg.Port.Mode)
	}
	if cfg.RoCE.Address.IsValid() {
		return nil, fmt.Errorf("%s: roce.address %v: leave it unset, so that each node takes its interface's own", what, cfg.RoCE.Address)
	}
	return cfg, nil
}

// checkWarning checks that a manifest says, before anything else, what
// its default does to the node's NIC and when rebinding is safe.
func checkWarning(name string, b []byte) error {
	head, _, _ := strings.Cut(string(b), "\n---")
	for _, want := range []string{"READ THIS BEFORE", "port.mode: af_xdp", "roce.address is", "unset", "DEDICATED STORAGE NIC", "port.bind", "ethtool -l"} {
		if !strings.Contains(head, want) {
			return fmt.Errorf("%s: the warning at the top lacks %q", name, want)
		}
	}
	return nil
}

// mebibytes parses a Kubernetes quantity in Mi or Gi.
func mebibytes(q string) (int, error) {
	for suffix, mult := range map[string]int{"Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.Atoi(n)
			return v * mult, err
		}
	}
	return 0, fmt.Errorf("quantity %q: want Mi or Gi", q)
}

// checkKube checks the DaemonSet and its ConfigMap against the daemon:
// every problem, not only the first.
func checkKube(k *kube) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	p := k.pod
	if !p.HostNetwork {
		bad("hostNetwork is not true: the af_xdp mode and port.bind work on the node's own interfaces")
	}
	if p.NodeSelector[nodeLabel] != "true" {
		bad("nodeSelector %v: want %s: \"true\", the nodes with a dedicated storage NIC", p.NodeSelector, nodeLabel)
	}
	if len(p.Containers) != 1 || len(p.InitContainers) != 1 {
		bad("%d containers, %d init containers: want one of each", len(p.Containers), len(p.InitContainers))
		return errs
	}
	main, init := p.Containers[0], p.InitContainers[0]
	for _, c := range []podContainer{main, init} {
		if !c.SecurityContext.Privileged {
			bad("container %s is not privileged", c.Name)
		}
	}
	if init.Image != main.Image {
		bad("init container image %q, main %q: want the same", init.Image, main.Image)
	}
	if want := []string{binPath, "restore-nic", "--config", configPath, "--keep-xdp"}; !slices.Equal(init.Command, want) {
		bad("init container command %q, want %q", init.Command, want)
	}
	if want := []string{"/bin/sh", "-c", restoreThenRun("")}; !slices.Equal(main.Command, want) {
		bad("main container command %q, want %q", main.Command, want)
	}

	vols := map[string]int{}
	for i, v := range p.Volumes {
		vols[v.Name] = i
	}
	volume := func(c podContainer, mountPath string) (int, bool) {
		for name, mp := range c.mounts() {
			if i, ok := vols[name]; ok && mp == mountPath {
				return i, true
			}
		}
		return 0, false
	}

	// The configuration: the ConfigMap's, mounted where the commands read it.
	var cfg *config.Config
	for _, c := range []podContainer{main, init} {
		i, ok := volume(c, path.Dir(configPath))
		if !ok || p.Volumes[i].ConfigMap == nil || p.Volumes[i].ConfigMap.Name != k.configMapName {
			bad("container %s: no ConfigMap %s mounted at %s", c.Name, k.configMapName, path.Dir(configPath))
		}
	}
	text, ok := k.configMap[path.Base(configPath)]
	if !ok {
		bad("ConfigMap %s has no %s", k.configMapName, path.Base(configPath))
	} else if c, err := checkSafeConfig("ConfigMap "+k.configMapName, text); err != nil {
		errs = append(errs, err)
	} else {
		cfg = c
	}

	// The state files: the host's /run/cephdpdkd in both containers.
	for _, c := range []podContainer{main, init} {
		for _, dir := range []string{nicbind.DefaultRunDir, hugepages.DefaultRunDir} {
			i, ok := volume(c, dir)
			if !ok || p.Volumes[i].HostPath == nil || p.Volumes[i].HostPath.Path != dir || p.Volumes[i].HostPath.Type != "DirectoryOrCreate" {
				bad("container %s: %s is not the host's %s (hostPath, DirectoryOrCreate)", c.Name, dir, dir)
			}
		}
	}

	// Hugepages: the pod's, a hugetlbfs emptyDir at eal.huge_dir.
	req, lim := main.Resources.Requests["hugepages-2Mi"], main.Resources.Limits["hugepages-2Mi"]
	mb, err := mebibytes(lim)
	switch {
	case lim == "" || req != lim:
		bad("main container hugepages-2Mi request %q, limit %q: want both, equal", req, lim)
	case err != nil:
		bad("hugepages-2Mi limit: %v", err)
	case cfg != nil && mb < cfg.EAL.MemoryMB:
		bad("hugepages-2Mi limit %s: less than eal.memory_mb %d", lim, cfg.EAL.MemoryMB)
	}
	if main.Resources.Limits["memory"] == "" {
		bad("main container: no memory limit (hugepages need a memory or CPU request)")
	}
	if cfg != nil {
		i, ok := volume(main, cfg.EAL.HugeDir)
		if cfg.EAL.NoHuge || cfg.EAL.Hugepages != nil || cfg.EAL.HugeDir == "" {
			bad("ConfigMap: eal: want the pod's hugepages at eal.huge_dir, not no_huge or eal.hugepages (the kubelet accounts for the node's pages)")
		} else if !ok || p.Volumes[i].EmptyDir == nil || p.Volumes[i].EmptyDir.Medium != "HugePages-2Mi" {
			bad("main container: eal.huge_dir %s is not an emptyDir of medium HugePages-2Mi", cfg.EAL.HugeDir)
		}
	}

	// modprobe for port.bind: the host's modules, read-only.
	for _, c := range []podContainer{main, init} {
		i, ok := volume(c, "/lib/modules")
		if !ok || p.Volumes[i].HostPath == nil || p.Volumes[i].HostPath.Path != "/lib/modules" {
			bad("container %s: no hostPath /lib/modules", c.Name)
		}
	}
	return errs
}

// cephadmSpec is the part of cephadm.yaml the test checks; Ceph's own
// ServiceSpec (checkCephadmPython) checks all of it.
type cephadmSpec struct {
	ServiceType string `yaml:"service_type"`
	ServiceID   string `yaml:"service_id"`
	Placement   struct {
		Label string `yaml:"label"`
	} `yaml:"placement"`
	ExtraEntrypointArgs []string `yaml:"extra_entrypoint_args"`
	Spec                struct {
		Image        string            `yaml:"image"`
		Entrypoint   string            `yaml:"entrypoint"`
		Privileged   bool              `yaml:"privileged"`
		Dirs         []string          `yaml:"dirs"`
		VolumeMounts map[string]string `yaml:"volume_mounts"`
		BindMounts   [][]string        `yaml:"bind_mounts"`
		Files        map[string]string `yaml:"files"`
	} `yaml:"spec"`
}

// parseCephadm parses cephadm.yaml's text.
func parseCephadm(b []byte) (*cephadmSpec, error) {
	var s cephadmSpec
	if err := yaml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", cephadmFile, err)
	}
	return &s, nil
}

// checkCephadm checks the cephadm spec against the daemon.
func checkCephadm(s *cephadmSpec) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.ServiceType != "container" || s.ServiceID == "" || s.Placement.Label == "" {
		bad("service_type %q, service_id %q, placement label %q: want a container service placed by label", s.ServiceType, s.ServiceID, s.Placement.Label)
	}
	if !s.Spec.Privileged {
		bad("spec.privileged is not true")
	}
	runDir := path.Join(cephadmHostRun, strings.TrimPrefix(nicbind.DefaultRunDir, "/run/"))
	if got, want := append([]string{s.Spec.Entrypoint}, s.ExtraEntrypointArgs...), restoreThenRun(runDir); !slices.Equal(got, []string{"/bin/sh", "-c", want}) {
		bad("entrypoint and extra_entrypoint_args %q, want /bin/sh -c %q", got, want)
	}
	// CONFIG_DIR: made by dirs, written by files, mounted where the
	// commands read the configuration.
	var dir string
	for d, mp := range s.Spec.VolumeMounts {
		if mp == path.Dir(configPath) {
			dir = d
		}
	}
	if dir == "" || !slices.Contains(s.Spec.Dirs, dir) {
		bad("no directory of spec.dirs mounted at %s (volume_mounts %v, dirs %v)", path.Dir(configPath), s.Spec.VolumeMounts, s.Spec.Dirs)
	}
	if text, ok := s.Spec.Files[dir+"/"+path.Base(configPath)]; !ok {
		bad("spec.files has no %s/%s", dir, path.Base(configPath))
	} else if _, err := checkSafeConfig("spec.files", text); err != nil {
		errs = append(errs, err)
	}
	binds := map[string]string{}
	for _, m := range s.Spec.BindMounts {
		opts := map[string]string{}
		for _, o := range m {
			k, v, _ := strings.Cut(o, "=")
			opts[k] = v
		}
		binds[opts["destination"]] = opts["source"]
	}
	for dst, src := range map[string]string{cephadmHostRun: path.Dir(nicbind.DefaultRunDir), "/lib/modules": "/lib/modules"} {
		if binds[dst] != src {
			bad("spec.bind_mounts: %s is not the host's %s (%v)", dst, src, binds)
		}
	}
	if nicbind.DefaultRunDir != hugepages.DefaultRunDir || path.Dir(nicbind.DefaultRunDir) != "/run" {
		bad("the state files are in %s and %s: not one directory of the host's /run", nicbind.DefaultRunDir, hugepages.DefaultRunDir)
	}
	return errs
}

// checkCephadmPython loads the spec with Ceph's own ServiceSpec (Debian
// 12's python3-ceph-common, Ceph 16.2), as `ceph orch apply -i` does:
// unknown fields and wrong types fail there.
func checkCephadmPython(ctx context.Context, file string) (string, error) {
	const script = `
import json, sys, yaml
from ceph.deployment.service_spec import ServiceSpec
spec = ServiceSpec.from_json(yaml.safe_load(open(sys.argv[1])))
spec.validate()
print(json.dumps({"class": type(spec).__name__, "name": spec.service_name(), "config": spec.config_json()}))
`
	// Debian's python3, where python3-ceph-common is, not whatever else
	// PATH finds first.
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", script, file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ceph.deployment.service_spec: %v\n%s", err, out)
	}
	var got struct {
		Class string         `json:"class"`
		Name  string         `json:"name"`
		Cfg   map[string]any `json:"config"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return "", fmt.Errorf("ceph.deployment.service_spec: %v\n%s", err, out)
	}
	if got.Class != "CustomContainerSpec" || got.Cfg["privileged"] != true {
		return "", fmt.Errorf("ceph.deployment.service_spec made a %s, config %v: want a privileged CustomContainerSpec", got.Class, got.Cfg)
	}
	return got.Name, nil
}

// kubeErrs parses kubernetes.yaml's text and returns every problem.
func kubeErrs(b []byte) []error {
	k, err := readKube(b)
	if err != nil {
		return []error{err}
	}
	return append(checkKube(k), checkWarning(kubeFile, b))
}

// cephadmErrs parses cephadm.yaml's text and returns every problem.
func cephadmErrs(b []byte) []error {
	s, err := parseCephadm(b)
	if err != nil {
		return []error{err}
	}
	return append(checkCephadm(s), checkWarning(cephadmFile, b))
}

func TestManifests(t *testing.T) {
	for file, check := range map[string]func([]byte) []error{kubeFile: kubeErrs, cephadmFile: cephadmErrs} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range check(b) {
			if err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
	}
}

// Ceph's own ServiceSpec takes the cephadm spec, and refuses it with a
// field cephadm does not know.
func TestCephadmSpecInCeph(t *testing.T) {
	b, err := os.ReadFile(cephadmFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := checkCephadmPython(ctx, cephadmFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Ceph's ServiceSpec accepts %s", name)

	// And refuses a field cephadm does not know.
	bad := filepath.Join(t.TempDir(), cephadmFile)
	if err := os.WriteFile(bad, bytes.Replace(b, []byte("  privileged: true"), []byte("  privileged: true\n  hugepages: 1Gi"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkCephadmPython(ctx, bad); err == nil || !strings.Contains(err.Error(), "hugepages") {
		t.Errorf("Ceph's ServiceSpec on a spec with an unknown field: %v", err)
	}
}

// Each check fails where it should: the manifests, broken one way at a
// time, as a careless edit would.
func TestManifestChecksFail(t *testing.T) {
	kubeText, err := os.ReadFile(kubeFile)
	if err != nil {
		t.Fatal(err)
	}
	cephadmText, err := os.ReadFile(cephadmFile)
	if err != nil {
		t.Fatal(err)
	}
	// The port mode of both manifests' configurations.
	const afXDP = "mode: af_xdp\n"
	for _, tc := range []struct {
		name      string
		text      []byte
		check     func([]byte) []error
		old, new_ string
		want      string
	}{
		{"no host network", kubeText, kubeErrs, "hostNetwork: true", "hostNetwork: false", "hostNetwork"},
		{"every node", kubeText, kubeErrs, "cephdpdkd.io/storage-nic: \"true\"", "kubernetes.io/os: linux", "nodeSelector"},
		{"unprivileged", kubeText, kubeErrs, "securityContext: {privileged: true}\n          resources", "securityContext: {privileged: false}\n          resources", "not privileged"},
		{"init runs run", kubeText, kubeErrs, `"restore-nic", "--config"`, `"run", "--config"`, "init container command"},
		{"init detaches the program", kubeText, kubeErrs, `cephdpdkd.yaml", "--keep-xdp"]`, `cephdpdkd.yaml"]`, "init container command"},
		{"no restore before run", kubeText, kubeErrs, "--keep-xdp &&\n", "--keep-xdp ;\n", "main container command"},
		{"no hugepages limit", kubeText, kubeErrs, "limits: {hugepages-2Mi: 1Gi, ", "limits: {", "hugepages-2Mi request"},
		{"too few hugepages", kubeText, kubeErrs, "hugepages-2Mi: 1Gi", "hugepages-2Mi: 256Mi", "less than eal.memory_mb"},
		{"hugepages not hugetlbfs", kubeText, kubeErrs, "medium: HugePages-2Mi", "medium: Memory", "HugePages-2Mi"},
		{"run dir in the pod", kubeText, kubeErrs, "hostPath: {path: /run/cephdpdkd, type: DirectoryOrCreate}", "emptyDir: {}", "is not the host's /run/cephdpdkd"},
		{"other ConfigMap", kubeText, kubeErrs, "configMap: {name: cephdpdkd-config}", "configMap: {name: other}", "no ConfigMap cephdpdkd-config"},
		{"invalid config", kubeText, kubeErrs, "ring_size: 4096,", "ring_size: 4095,", "ConfigMap cephdpdkd-config"},
		{"rebinding config", kubeText, kubeErrs, afXDP, afXDP + "      bind: {driver: vfio-pci, interface: storage0}\n", "port.bind"},
		{"rebind mode", kubeText, kubeErrs, afXDP, "mode: rebind\n", "ConfigMap cephdpdkd-config"},
		{"one node's address", kubeText, kubeErrs, "# address: unset", "address: 192.0.2.10 #", "leave it unset"},
		{"no warning", kubeText, kubeErrs, "DEDICATED STORAGE NIC", "storage NIC", "warning at the top"},
		{"cephadm unprivileged", cephadmText, cephadmErrs, "privileged: true", "privileged: false", "spec.privileged"},
		{"cephadm no restore", cephadmText, cephadmErrs, "restore-nic --config /etc/cephdpdkd/cephdpdkd.yaml --run-dir /run/host/cephdpdkd --keep-xdp && ", "", "extra_entrypoint_args"},
		{"cephadm run dir in the container", cephadmText, cephadmErrs, "'source=/run'", "'source=/var/lib/cephdpdkd'", "bind_mounts: /run/host"},
		{"cephadm run dir not the host's", cephadmText, cephadmErrs, " --run-dir /run/host/cephdpdkd", "", "extra_entrypoint_args"},
		{"cephadm config elsewhere", cephadmText, cephadmErrs, "CONFIG_DIR: /etc/cephdpdkd", "CONFIG_DIR: /etc/other", "no directory of spec.dirs"},
		{"cephadm invalid config", cephadmText, cephadmErrs, "main_lcore: 0", "main_lcore: 7", "spec.files"},
		{"cephadm rebinding config", cephadmText, cephadmErrs, afXDP, afXDP + "        bind: {driver: vfio-pci, interface: storage0}\n", "port.bind"},
		{"cephadm rebind mode", cephadmText, cephadmErrs, afXDP, "mode: rebind\n", "spec.files"},
		{"cephadm no warning", cephadmText, cephadmErrs, "DEDICATED STORAGE NIC", "storage NIC", "warning at the top"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(tc.text, []byte(tc.old)) {
				t.Fatalf("the manifest has no %q to break", tc.old)
			}
			var msgs []string
			for _, err := range tc.check(bytes.ReplaceAll(tc.text, []byte(tc.old), []byte(tc.new_))) {
				if err != nil {
					msgs = append(msgs, err.Error())
				}
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("broken (%q → %q): errors %q, want one with %q", tc.old, tc.new_, msgs, tc.want)
			}
		})
	}
}
