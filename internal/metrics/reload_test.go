package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReloads(t *testing.T) {
	r := NewReloads("aaa")
	r.Failed()
	r.Loaded("bbb")
	r.Loaded("ccc")
	want := `
# HELP cephdpdkd_config_info The running configuration, by the SHA-256 of its file (1).
# TYPE cephdpdkd_config_info gauge
cephdpdkd_config_info{hash="ccc"} 1
# HELP cephdpdkd_config_reloads_total Configuration reloads (SIGHUP), by result: ok, or error (refused; the previous configuration kept running).
# TYPE cephdpdkd_config_reloads_total counter
cephdpdkd_config_reloads_total{result="error"} 1
cephdpdkd_config_reloads_total{result="ok"} 2
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
