//go:build linux

package rxeguest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

// Where a guest's Ceph client keeps its files (GuestCephDir is on the
// guest's tmpfs).
const (
	GuestCephConf    = "/etc/ceph/ceph.conf"
	GuestCephKeyring = "/etc/ceph/ceph.client.admin.keyring"
	GuestCephDir     = "/tmp/ceph" // run/ (admin sockets), log/ (one log per client process), crash/
)

// CephTransport is the messenger a guest's Ceph client uses.
type CephTransport int

const (
	// CephTCP is ms_type = async+posix: kernel TCP over eth0.
	CephTCP CephTransport = iota
	// CephRDMA is ms_type = async+rdma in rdma_cm mode on rxe0: the client
	// resolves and connects to the monitor's and the OSDs' addresses with
	// rdma_cm (port space RDMA_PS_TCP, the daemons' TCP port numbers) and
	// carries the messenger's byte stream in SENDs; see CephRDMASettings.
	CephRDMA
)

func (t CephTransport) String() string {
	switch t {
	case CephTCP:
		return "async+posix"
	case CephRDMA:
		return "async+rdma"
	}
	return fmt.Sprintf("CephTransport(%d)", int(t))
}

// CephRDMASettings are the [global] settings CephRDMA adds to a guest's
// ceph.conf, in order. Ceph 16 takes the rdma_cm path (RDMAIWARPStack)
// only with ms_async_rdma_type = iwarp, which works over RoCE too; its
// "ib" type exchanges QP numbers over a TCP connection instead. GID index 1
// is rxe0's IPv4 GID (index 0 is the link-local IPv6 one). A buffer is
// the largest SEND (the messenger's chunk); the client registers
// receive_buffers of them (128 MiB), so give the guest memory to match.
var CephRDMASettings = [][2]string{
	{"ms_type", "async+rdma"},
	{"ms_async_rdma_device_name", "rxe0"},
	{"ms_async_rdma_type", "iwarp"},
	{"ms_async_rdma_cm", "true"},
	{"ms_async_rdma_support_srq", "true"},
	{"ms_async_rdma_gid_idx", "1"},
	{"ms_async_rdma_buffer_size", "131072"},
	{"ms_async_rdma_send_buffers", "256"},
	{"ms_async_rdma_receive_buffers", "1024"},
	{"ms_async_rdma_receive_queue_len", "256"},
	{"ms_async_rdma_polling_us", "0"},
}

// CephClient is what a guest's Ceph client needs to reach a cluster.
type CephClient struct {
	// FSID is the cluster's fsid.
	FSID string
	// MonHost is the monitors' addresses as mon_host takes them, for
	// instance "[v2:10.77.0.1:3300,v1:10.77.0.1:6789]".
	MonHost string
	// Keyring is a keyring file's contents holding client.admin's key.
	Keyring []byte
	// Transport is the messenger: CephTCP (the default) or CephRDMA.
	Transport CephTransport
	// Options are more [global] settings, such as "debug_ms": "1/5". One
	// that names a setting Conf writes anyway replaces its value there.
	Options map[string]string
}

// CephClientFromFiles reads the fsid and mon_host of a cluster's ceph.conf
// (cephcluster's ConfPath) and the keyring at keyringPath (KeyringPath)
// into a CephClient using transport.
func CephClientFromFiles(confPath, keyringPath string, transport CephTransport) (CephClient, error) {
	conf, err := os.ReadFile(confPath)
	if err != nil {
		return CephClient{}, fmt.Errorf("rxeguest: %w", err)
	}
	keyring, err := os.ReadFile(keyringPath)
	if err != nil {
		return CephClient{}, fmt.Errorf("rxeguest: %w", err)
	}
	global := parseConfSection(conf, "global")
	c := CephClient{FSID: global["fsid"], MonHost: global["mon_host"], Keyring: keyring, Transport: transport}
	if c.FSID == "" || c.MonHost == "" {
		return CephClient{}, fmt.Errorf("rxeguest: %s: no fsid or mon_host in [global]", confPath)
	}
	return c, nil
}

// parseConfSection returns the settings of one section of a ceph.conf,
// keys normalised with confKey.
func parseConfSection(conf []byte, section string) map[string]string {
	m := make(map[string]string)
	in := false
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			in = strings.TrimSpace(line[1:len(line)-1]) == section
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if in && ok {
			m[confKey(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// confKey normalises a setting's name as Ceph does: spaces, dashes and
// underscores are the same.
func confKey(k string) string {
	return strings.NewReplacer(" ", "_", "-", "_").Replace(strings.TrimSpace(k))
}

// Conf returns the ceph.conf SetupCeph installs in the guest.
func (c CephClient) Conf() string {
	settings := [][2]string{
		{"fsid", c.FSID},
		{"mon_host", c.MonHost},
		{"ms_type", "async+posix"},
		{"ms_bind_ipv6", "false"},
		{"auth_cluster_required", "cephx"},
		{"auth_service_required", "cephx"},
		{"auth_client_required", "cephx"},
		{"keyring", GuestCephKeyring},
		{"run_dir", GuestCephDir + "/run"},
		// One socket and log per client process: clients may run at once.
		{"admin_socket", GuestCephDir + "/run/$cluster-$name.$pid.asok"},
		{"log_file", GuestCephDir + "/log/$cluster-$name.$pid.log"},
		{"crash_dir", GuestCephDir + "/crash"},
		{"log_to_stderr", "false"},
		{"err_to_stderr", "true"},
		// Fail rather than retry for the default 5 minutes; Guest.Rados
		// bounds a command as a whole besides.
		{"client_mount_timeout", "60"},
		{"rados_mon_op_timeout", "60"},
		{"rados_osd_op_timeout", "120"},
		// The guest has one vCPU under TCG.
		{"ms_async_op_threads", "2"},
	}
	set := func(k, v string) {
		k = confKey(k)
		for i := range settings {
			if settings[i][0] == k {
				settings[i][1] = v
				return
			}
		}
		settings = append(settings, [2]string{k, v})
	}
	if c.Transport == CephRDMA {
		for _, s := range CephRDMASettings {
			set(s[0], s[1])
		}
	}
	keys := make([]string, 0, len(c.Options))
	for k := range c.Options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set(k, c.Options[k])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# written by rxeguest for a guest's Ceph client (%s)\n[global]\n", c.Transport)
	for _, s := range settings {
		fmt.Fprintf(&b, "%s = %s\n", s[0], s[1])
	}
	return b.String()
}

// SetupCeph installs c's ceph.conf and keyring in a guest booted WithCeph
// (at GuestCephConf and GuestCephKeyring, where rados finds them without
// options) and makes GuestCephDir. Calling it again replaces them: each
// rados command reads them afresh.
func (g *Guest) SetupCeph(ctx context.Context, c CephClient) error {
	if len(c.Keyring) == 0 {
		return fmt.Errorf("rxeguest: %s: CephClient has no keyring", g.Name)
	}
	if err := g.runOK(ctx, "mkdir -p /etc/ceph "+GuestCephDir+"/run "+GuestCephDir+"/log "+GuestCephDir+"/crash"); err != nil {
		return err
	}
	if err := g.WriteFile(ctx, GuestCephConf, []byte(c.Conf())); err != nil {
		return err
	}
	return g.WriteFile(ctx, GuestCephKeyring, c.Keyring)
}

// radosTimeout bounds a rados command whose ctx has no deadline.
const radosTimeout = 2 * time.Minute

// Rados runs rados with args (each passed as one word) in the guest and
// returns its output and exit status, as Run does. The guest kills it
// (SIGKILL, exit status 137) a second before ctx's deadline, or after
// two minutes without one, so that the console stays usable whatever
// rados is stuck in.
func (g *Guest) Rados(ctx context.Context, args ...string) (out string, exitCode int, err error) {
	limit := radosTimeout
	if d, ok := ctx.Deadline(); ok {
		limit = time.Until(d) - time.Second
	}
	secs := max(int(limit/time.Second), 1)
	var b strings.Builder
	fmt.Fprintf(&b, "timeout -s KILL %d rados", secs)
	for _, a := range args {
		b.WriteString(" " + qemuvm.ShellQuote(a))
	}
	return g.Run(ctx, b.String())
}
