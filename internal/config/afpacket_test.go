package config

import (
	"strings"
	"testing"
)

// TestAFPacketFrames: a net_af_packet port's framesz must hold a frame of
// the port MTU and fit an mbuf; each miss is one error naming what to set,
// and the jumbo settings the operator guide gives pass.
func TestAFPacketFrames(t *testing.T) {
	port := func(dev, extra string) string {
		return strings.Replace(minimal, "  device: net_null0", "  device: \""+dev+"\""+extra, 1)
	}
	jumbo := "\n  mtu: 9000\nmempool: {data_room: 9344}"
	for _, tt := range []struct {
		name, yaml string
		want       []string // nil: valid
	}{
		{"defaults at 1500", port("net_af_packet0,iface=veth0", ""), nil},
		{"jumbo", port("net_af_packet0,iface=veth0,blocksz=36864,framesz=9216,framecnt=1024", jumbo), nil},
		{"jumbo default framesz", port("net_af_packet0,iface=veth0", jumbo),
			[]string{"port.device", "framesz=2048 holds 1982 bytes", "MTU 9000", "at least 9088"}},
		{"jumbo framesz one short", port("net_af_packet0,iface=veth0,blocksz=2322432,framesz=9072,framecnt=256", jumbo),
			[]string{"framesz=9072 holds 9006 bytes"}},
		{"framesz past the mbuf", port("net_af_packet0,iface=veth0,blocksz=16384,framesz=16384,framecnt=1024", jumbo),
			[]string{"port.device", "framesz=16384 carries up to 16352 bytes", "mbuf's 9216", "raise mempool.data_room to 16480"}},
		{"bad framesz", port("net_af_packet0,iface=veth0,framesz=big", ""), []string{"framesz=big: want a positive"}},
		{"bad blocksz", port("net_af_packet0,iface=veth0,blocksz=-1", ""), []string{"blocksz=-1: want a positive"}},
		// 7 frames and a gap per block: DPDK would look for the 8th frame
		// in the gap.
		{"block of partial frames", port("net_af_packet0,iface=veth0,blocksz=65536,framesz=9216,framecnt=252", jumbo),
			[]string{"blocksz=65536, framesz=9216", "blocksz a multiple of framesz"}},
		{"block past a page", port("net_af_packet0,iface=veth0,blocksz=9216,framesz=9216,framecnt=256", jumbo),
			[]string{"of the 4096-byte page"}},
		{"unaligned frame", port("net_af_packet0,iface=veth0,blocksz=36864,framesz=9100,framecnt=256", jumbo),
			[]string{"framesz must be a multiple of 16"}},
		{"smallest jumbo frame", port("net_af_packet0,iface=veth0,blocksz=290816,framesz=9088,framecnt=256", jumbo), nil},
		{"not af_packet", port("net_null0,size=9216", jumbo), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
				return
			}
			checkErr(t, "Parse", err, tt.want...)
		})
	}
	// A data room too small for the MTU is the data room's error alone.
	_, err := Parse([]byte(port("net_af_packet0,iface=veth0,blocksz=36864,framesz=9216,framecnt=1024", "\n  mtu: 9000")))
	checkErr(t, "Parse", err, "mempool.data_room", "frames would span mbufs")
	if strings.Contains(err.Error(), "framesz") {
		t.Errorf("a data room too small for the MTU also blamed framesz: %v", err)
	}
}
