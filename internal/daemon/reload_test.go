package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
)

// reloadConfig is the Ceph rule set with roce drained by the loop
// (through its lanes) at roceRing slots, and, with extra, a service
// "extra" that claims TCP port 1, which the capture never uses.
func reloadConfig(t *testing.T, device string, roceRing int, extra bool) *config.Config {
	t.Helper()
	c := cephConfig(t, "reload", device, 4096)
	c.Services[2].RingSize = roceRing
	if extra {
		c.Services = append(c.Services, config.Service{Name: "extra", RingSize: 256, Consumer: config.Consumer{Type: config.ConsumerCount}})
		c.Rules = append([]config.Rule{{Service: "extra", Protocol: 6, DstPorts: []config.PortRange{{Lo: 1, Hi: 1}}}}, c.Rules...)
	}
	c.Pollers[0].Services = []string{"roce"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// A capture replayed once through net_pcap while the daemon reloads
// back and forth between two configurations (a service added and
// removed, the rules changed, the roce service rebuilt with another
// ring size): mon, osd and unclaimed, unchanged, see exactly the
// capture's packets and consume them all; every roce packet is counted
// once, dispatched or dropped while its service was closed; every mbuf
// comes back.
func TestReloadUnderTraffic(t *testing.T) {
	frames, path, want := mixCapture(t, 11, 200000)
	device := "net_pcap15,rx_pcap=" + path
	cfgs := []*config.Config{reloadConfig(t, device, 2048, false), reloadConfig(t, device, 1024, true)}
	d := start(t, cfgs[0])

	roce := map[*dispatch.Service]bool{} // every version of the roce service
	note := func() {
		for _, s := range d.Services() {
			if s.Name == "roce" {
				roce[s] = true
			}
		}
	}
	note()
	total := uint64(len(frames))
	reloads, during := 0, 0
	var took time.Duration
	var closed uint64
	for received(d) < total || reloads < 4 {
		if reloads > 2000 {
			t.Fatalf("the capture did not play out in %d reloads: received %d of %d", reloads, received(d), total)
		}
		if received(d) < total {
			during++
		}
		reloads++
		plan, err := daemon.NewPlan(cfgs[reloads%2])
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.Reload(context.Background(), plan)
		if err != nil {
			t.Fatalf("reload %d: %v", reloads, err)
		}
		if st.Rebuilt != 1 || st.Kept != 3 || st.Freed != 0 {
			t.Errorf("reload %d: %+v; want 1 rebuilt, 3 kept, nothing freed", reloads, st)
		}
		took = max(took, st.Took)
		closed += st.Closed
		note()
		// Some traffic between reloads, as an operator would.
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "the lanes drained", func() bool {
		for _, s := range d.Services() {
			if s.Queued() > 0 {
				return false
			}
		}
		return true
	})
	t.Logf("%d reloads, %d while the capture played; longest %v; %d roce packets dropped while closed", reloads, during, took, closed)
	if during < 2 {
		t.Logf("only %d reloads during the replay: the replay outran them", during)
	}
	got := counts(d)
	for _, name := range []string{"mon", "osd", "unclaimed"} {
		if got[name] != want[name] {
			t.Errorf("service %s (unchanged): %d packets, want %d", name, got[name], want[name])
		}
	}
	for i, s := range d.Services() {
		if s.Name != "roce" && s.Name != "extra" {
			if c := d.ConsumerCounts(i).Packets; c != want[s.Name] || s.Stats.Drops.Load() != 0 {
				t.Errorf("service %s: consumed %d, dropped %d; want %d and 0", s.Name, c, s.Stats.Drops.Load(), want[s.Name])
			}
		}
	}
	var roceIn uint64
	for s := range roce {
		roceIn += s.Stats.Packets.Load() + s.Stats.Drops.Load()
	}
	if roceIn != want["roce"] {
		t.Errorf("roce: %d packets dispatched or dropped over %d versions, want %d", roceIn, len(roce), want["roce"])
	}
	if roceDropped(roce) != closed {
		t.Errorf("roce drops %d, the reloads reported %d dropped while closed", roceDropped(roce), closed)
	}
}

func roceDropped(versions map[*dispatch.Service]bool) (n uint64) {
	for s := range versions {
		n += s.Stats.Drops.Load()
	}
	return n
}

// A reload that changes a setting needing a restart, or whose services
// would need a larger mbuf pool, is refused with the setting named, and
// the running services stay as they were.
func TestReloadRefused(t *testing.T) {
	device := "net_pcap16,rx_pcap=../../configs/sample/ceph-node.pcap,infinite_rx=1"
	cfg := reloadConfig(t, device, 2048, false)
	d := start(t, cfg)
	before := d.Services()
	for _, tt := range []struct {
		name string
		edit func(c *config.Config)
		want string
	}{
		{"mtu", func(c *config.Config) { c.Port.MTU = 1400 }, "port.mtu: cannot change while the daemon runs"},
		{"pool", func(c *config.Config) { c.Services[1].RingSize = 1 << 20 }, "cannot grow while the daemon runs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := reloadConfig(t, device, 2048, false)
			tt.edit(c)
			plan, err := daemon.NewPlan(c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Reload(context.Background(), plan)
			if !errors.Is(err, daemon.ErrReloadRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("reload: %v; want refused with %q", err, tt.want)
			}
			for i, s := range d.Services() {
				if s != before[i] {
					t.Errorf("service %s replaced by a refused reload", s.Name)
				}
			}
		})
	}
	waitFor(t, 5*time.Second, "traffic after refused reloads", func() bool { return consumed(d) > 1000 })
}
