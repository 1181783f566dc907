//go:build linux

package cephcluster

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"
)

// confTemplate is the one ceph.conf the daemons and the clients share.
// Every path points into Dir; the comments say why each setting that is
// not a path is there.
var confTemplate = template.Must(template.New("ceph.conf").Parse(`# written by cephcluster for a throw-away test cluster
[global]
fsid = {{.FSID}}
mon_initial_members = a
mon_host = {{.MonHost}}
# Daemons bind and advertise only this address: with public_addr and
# cluster_addr unset the OSD's cluster and heartbeat sockets listen on
# 0.0.0.0.
public_addr = {{.IP}}
cluster_addr = {{.IP}}
ms_bind_ipv4 = true
ms_bind_ipv6 = false

auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
# Clients must prove their global_id on reconnect; this is also what keeps
# the AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED warning away.
auth_allow_insecure_global_id_reclaim = false

# Nothing in /etc/ceph, /var/lib/ceph, /var/run/ceph or /var/log/ceph.
run_dir = {{.Dir}}/run
admin_socket = {{.Dir}}/run/$name.asok
pid_file = {{.Dir}}/run/$name.pid
log_file = {{.Dir}}/log/$name.log
mon_cluster_log_file = default={{.Dir}}/log/cluster.$channel.log cluster={{.Dir}}/log/cluster.log
crash_dir = {{.Dir}}/crash
log_to_stderr = false
err_to_stderr = true
# Errors and level-0 events only, in the file and in the in-memory ring:
# formatting debug entries costs CPU on every op.
debug_ms = 0/0
debug_mon = 0/0
debug_paxos = 0/0
debug_auth = 0/0
debug_monc = 0/0
debug_mgrc = 0/0
debug_osd = 0/0
debug_memstore = 0/0
debug_objecter = 0/0
debug_rados = 0/0
# Fewer idle threads: the machine is shared with a DPDK poll loop.
ms_async_op_threads = 2

# One OSD: one copy of everything, placed per OSD rather than per host.
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = {{.PGNum}}
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
# Size 1 is the point here, not a mistake to warn about.
mon_warn_on_pool_no_redundancy = false
# The mon store is a few MB: no HEALTH_WARN (or a mon shutting itself
# down) because the test machine's disk is fairly full.
mon_data_avail_warn = 1
mon_data_avail_crit = 0
{{- if .WithMgr}}
# Only the always-on mgr modules (no restful, iostat, nfs).
mgr_initial_modules =
{{- else}}
# No mgr: MGR_DOWN is raised once this long has passed since mkfs, and
# there is never a mgr to wait for.
mon_mgr_mkfs_grace = 315360000
{{- end}}
# Commit map changes after 0.1 s rather than 1 s: OSD boots, pool
# creation and the like take effect sooner.
paxos_propose_interval = 0.1

[client]
keyring = {{.Dir}}/client.admin.keyring
# One socket per client process, so that concurrent clients don't collide.
admin_socket = {{.Dir}}/run/$name.$pid.asok
# Give up connecting after this long instead of the default 300 s.
client_mount_timeout = {{.MountTimeout}}
# Ask the monitor for a new OSD map once an op has waited 2 s, not 10 s:
# after an OSD crash the map is the only way a client learns the new
# OSD's address, and the monitor pushes none to it.
objecter_tick_interval = 1
objecter_timeout = 2
# An op (or mon command) fails with ETIMEDOUT after a minute instead of
# waiting forever, e.g. on a full OSD or a cluster gone with its test.
rados_osd_op_timeout = 60
rados_mon_op_timeout = 60

[mon]
mon_data = {{.Dir}}/mon/$id
keyring = $mon_data/keyring
mon_cpu_threads = 1

[mgr]
mgr_data = {{.Dir}}/mgr/$id
keyring = $mgr_data/keyring

[osd]
osd_data = {{.Dir}}/osd/$id
keyring = $osd_data/keyring
osd_objectstore = memstore
# Capacity the OSD reports; the objects themselves live in its RAM.
memstore_device_bytes = {{.MemstoreBytes}}
# SIGTERM shuts down cleanly, which for memstore means saving every object
# to osd_data, so that a stopped OSD comes back with its data. (The fast
# default exits at once and memstore loses everything.)
osd_fast_shutdown = false
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
osd_open_classes_on_start = false
`))

type confParams struct {
	FSID          string
	MonHost       string
	IP            string
	Dir           string
	PGNum         int
	WithMgr       bool
	MountTimeout  int
	MemstoreBytes int64
}

func writeConf(path string, p confParams) error {
	var b strings.Builder
	if err := confTemplate.Execute(&b, p); err != nil {
		return fmt.Errorf("ceph.conf: %w", err)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// NewKey returns a fresh cephx secret in the form ceph-authtool
// --gen-print-key prints: base64 of the encoded CryptoKey, that is the
// key type (1, AES), the creation time (seconds, nanoseconds), and the
// length-prefixed 16-byte secret, all little-endian.
func NewKey() (string, error) {
	var b [2 + 8 + 2 + 16]byte
	now := time.Now()
	binary.LittleEndian.PutUint16(b[0:], 1)
	binary.LittleEndian.PutUint32(b[2:], uint32(now.Unix()))
	binary.LittleEndian.PutUint32(b[6:], uint32(now.Nanosecond()))
	binary.LittleEndian.PutUint16(b[10:], 16)
	if _, err := rand.Read(b[12:]); err != nil {
		return "", fmt.Errorf("cephx key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b[:]), nil
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("uuid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// An entity is one keyring section: a cephx name, its secret and its
// capabilities as (service, grant) pairs.
type entity struct {
	name string
	key  string
	caps [][2]string
}

// writeKeyring writes entities in the plain-text keyring format.
func writeKeyring(path string, ents ...entity) error {
	var b strings.Builder
	for _, e := range ents {
		fmt.Fprintf(&b, "[%s]\n\tkey = %s\n", e.name, e.key)
		for _, c := range e.caps {
			fmt.Fprintf(&b, "\tcaps %s = %q\n", c[0], c[1])
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
