package config

import (
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// roce.max_sessions left out: a node's thousands of bridged connections,
// whose idle ones register nothing; with built-in services, whose
// sessions register buffers of their own, as many as roce.memory_mb
// holds beside the bridge's pools.
func TestRoCESessionsDefault(t *testing.T) {
	perSession := (session.DefaultSendBuffers + session.DefaultRecvBuffers) * session.DefaultBufferSize
	pools := (bridge.DefaultRecvPool + bridge.DefaultSendPool) * session.DefaultBufferSize
	for _, tc := range []struct {
		name    string
		section string // appended to ownersBase's roce section
		want    int
		err     string // a substring of Parse's error; "": valid
	}{
		{"bridge", "  bridge: {}\n", DefaultRoCESessions, ""},
		{"bridge, set", "  bridge: {}\n  max_sessions: 100\n", 100, ""},
		{"built-in", "  ceph_tcp: [{listen: '127.0.0.1:6800', app: echo}]\n", DefaultRoCEMemoryMB << 20 / perSession, ""},
		{"built-in and bridge", "  bridge: {}\n  listen: [{port: 9000, app: echo}]\n", (DefaultRoCEMemoryMB<<20 - pools) / perSession, ""},
		{"built-in, more memory", "  memory_mb: 1048576\n  buffer_size: 4096\n  listen: [{port: 7000, app: echo}]\n", DefaultRoCESessions, ""},
		{"built-in, set", "  listen: [{port: 7000, app: echo}]\n  max_sessions: 3\n", 3, ""},
		{"built-in, no room", "  memory_mb: 4\n  listen: [{port: 7000, app: echo}]\n", 1, "roce.memory_mb: 4 MB cannot hold 1 sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(ownersBase + tc.section))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RoCE.MaxSessions != tc.want {
				t.Errorf("max_sessions %d, want %d", c.RoCE.MaxSessions, tc.want)
			}
		})
	}
}
