package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// ownersBase is a configuration with a RoCE endpoint whose address is
// the kernel interface's, so that it may bridge. Its roce section takes
// what each test appends.
const ownersBase = sharedAddressBase + `roce:
  service: roce
  address: 10.0.0.5
`

// Each RoCE setting the YAML leaves out takes the default of the package
// that owns the behaviour: no copy of it lives here.
func TestRoCEDefaultsAreTheOwners(t *testing.T) {
	c, err := Parse([]byte(ownersBase + "  bridge: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.RoCE
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"buffer_size", r.BufferSize, session.DefaultBufferSize},
		{"send_buffers", r.SendBuffers, session.DefaultSendBuffers},
		{"recv_buffers", r.RecvBuffers, session.DefaultRecvBuffers},
		{"mtu", r.MTU, cm.DefaultPathMTU},
		{"window", r.Window, 0}, // the endpoint's roce.DefaultMaxUnackedPSNs
		{"rnr_timer", r.RNRTimer, uint8(cm.DefaultMinRNRTimer)},
		{"timeout", r.Timeout, uint8(cm.DefaultTimeout)},
		{"retry_count", r.RetryCount, uint8(cm.DefaultRetryCount)},
		{"rnr_retry", r.RNRRetry, uint8(cm.DefaultRNRRetry)},
		{"idle_probe", r.IdleProbeInterval(), roce.DefaultIdleProbe},
		{"max_sessions", r.MaxSessions, DefaultRoCESessions},
		{"memory_mb", r.MemoryMB, DefaultRoCEMemoryMB},
		{"bridge.chunks", r.Bridge.Chunks, bridge.DefaultChunks},
		{"bridge.recv_pool", r.Bridge.RecvPool, bridge.DefaultRecvPool},
		{"bridge.send_pool", r.Bridge.SendPool, bridge.DefaultSendPool},
	} {
		if tc.got != tc.want {
			t.Errorf("roce.%s defaults to %v, want the owner's %v", tc.key, tc.got, tc.want)
		}
	}
}

// The limits validate enforces are the owners': a value at each limit
// passes, one past it fails on its key.
func TestRoCELimitsAreTheOwners(t *testing.T) {
	// Small buffers and the most memory, so that no limit trips the
	// memory check.
	const room = "  buffer_size: 64\n  memory_mb: 1048576\n"
	for _, tc := range []struct {
		key      string // as written in the section
		min, max any
		below    any // nil: the minimum is the type's
		above    any
		section  string // what else the section needs
		complain string // the key validate names
	}{
		{"buffer_size", session.MinBufferSize, session.MaxBufferSize, session.MinBufferSize - 1, session.MaxBufferSize + 1, "  memory_mb: 1048576\n", "roce.buffer_size"},
		{"send_buffers", 1, session.MaxBuffers, nil, session.MaxBuffers + 1, room, "send_buffers and recv_buffers"},
		{"recv_buffers", 1, session.MaxBuffers, nil, session.MaxBuffers + 1, room, "send_buffers and recv_buffers"},
		{"rnr_timer", 1, roce.MaxTimerCode, nil, roce.MaxTimerCode + 1, "", "rnr_timer and timeout"},
		{"timeout", 1, roce.MaxTimerCode, nil, roce.MaxTimerCode + 1, "", "rnr_timer and timeout"},
		{"retry_count", 1, roce.MaxRetry, nil, roce.MaxRetry + 1, "", "retry_count and rnr_retry"},
		{"rnr_retry", 1, roce.MaxRetry, nil, roce.MaxRetry + 1, "", "retry_count and rnr_retry"},
		{"idle_probe", roce.MinIdleProbe, roce.MaxIdleProbe, roce.MinIdleProbe - time.Millisecond, roce.MaxIdleProbe + time.Second, "", "roce.idle_probe"},
		{"bridge: {chunks", 1, bridge.MaxChunks, nil, bridge.MaxChunks + 1, room, "roce.bridge.chunks"},
		{"bridge: {recv_pool", bridge.MinPool, bridge.MaxPool, bridge.MinPool - 1, bridge.MaxPool + 1, room, "roce.bridge.recv_pool"},
		{"bridge: {send_pool", bridge.MinPool, bridge.MaxPool, bridge.MinPool - 1, bridge.MaxPool + 1, room, "roce.bridge.send_pool"},
	} {
		yaml := func(v any) string {
			line := fmt.Sprintf("  %s: %v", tc.key, v)
			if strings.Contains(tc.key, "{") {
				line += "}"
			}
			return ownersBase + tc.section + line + "\n"
		}
		for _, v := range []any{tc.min, tc.max} {
			if _, err := Parse([]byte(yaml(v))); err != nil {
				t.Errorf("roce.%s: %v refused: %v", tc.key, v, err)
			}
		}
		for _, v := range []any{tc.below, tc.above} {
			if v == nil {
				continue
			}
			_, err := Parse([]byte(yaml(v)))
			checkErr(t, fmt.Sprintf("roce.%s: %v", tc.key, v), err, tc.complain)
		}
	}
}
