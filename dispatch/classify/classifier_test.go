package classify

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Services of the Ceph node rule set.
const (
	svcKernel = iota
	svcMon
	svcOSD
	svcRoCE
	numCephServices
)

// roceIP is the address the userspace RoCE endpoint owns.
var roceIP = ip4B

// cephRules are the rules a Ceph node runs with: messenger traffic to the
// mon and OSD ports, replies from OSDs to this node's clients, RoCEv2 and
// ARP for the RoCE endpoint; everything else stays with the kernel.
func cephRules() []Rule {
	return []Rule{
		{Service: svcMon, Proto: ProtoTCP, DstPorts: []PortRange{{3300, 3300}, {6789, 6789}}},
		{Service: svcOSD, Proto: ProtoTCP, DstPorts: []PortRange{{6800, 7568}}},
		{Service: svcOSD, Proto: ProtoTCP, SrcPorts: []PortRange{{6800, 7568}}},
		{Service: svcRoCE, Proto: ProtoUDP, DstPorts: []PortRange{{4791, 4791}}},
		{Service: svcRoCE, EtherType: EtherTypeARP, DstPrefixes: []netip.Prefix{netip.PrefixFrom(roceIP, 32)}},
	}
}

func mustCompile(tb testing.TB, rules []Rule, numServices, def int) *Classifier {
	tb.Helper()
	c, err := Compile(rules, numServices, def)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return c
}

// refMatch is the obvious matcher the compiled tables must agree with: it
// tries each rule in turn. It returns the index of the first rule matching
// h, or -1.
func refMatch(rules []Rule, h *Headers) int {
	inRanges := func(rs []PortRange, p uint16) bool {
		for _, r := range rs {
			if r.Lo <= p && p <= r.Hi {
				return true
			}
		}
		return false
	}
	for i, r := range rules {
		if r.EtherType != 0 && r.EtherType != h.EtherType {
			continue
		}
		if r.Proto != 0 && (h.IPVersion == 0 || r.Proto != h.Proto) {
			continue
		}
		if len(r.DstPorts) > 0 && (!h.HasPorts || !inRanges(r.DstPorts, h.DstPort)) {
			continue
		}
		if len(r.SrcPorts) > 0 && (!h.HasPorts || !inRanges(r.SrcPorts, h.SrcPort)) {
			continue
		}
		if len(r.DstPrefixes) > 0 {
			found := false
			for _, p := range r.DstPrefixes {
				if p.Contains(h.Dst) {
					found = true
					break
				}
			}
			if !found {
				continue
			}
		}
		return i
	}
	return -1
}

func TestClassifyCeph(t *testing.T) {
	c := mustCompile(t, cephRules(), numCephServices, svcKernel)

	tcp4 := func(src, dst uint16) []byte {
		ip := ipv4(layers.IPProtocolTCP)
		return serialize(t, ethernet(layers.EthernetTypeIPv4), ip, tcp(src, dst, ip), rawLayer("ceph v2\n"))
	}
	udp4 := func(src, dst uint16) []byte {
		ip := ipv4(layers.IPProtocolUDP)
		return serialize(t, ethernet(layers.EthernetTypeIPv4), ip, udp(src, dst, ip), rawLayer("payload!"))
	}
	arp := func(target netip.Addr) []byte {
		return serialize(t, ethernet(layers.EthernetTypeARP), arpRequest(target))
	}
	frames := map[string][]byte{}
	for _, fc := range validFrames(t) {
		frames[fc.name] = fc.frame
	}

	tests := []struct {
		name    string
		frame   []byte
		service int
		reason  Reason
	}{
		{"mon_msgr2", tcp4(40000, 3300), svcMon, ReasonNone},
		{"mon_msgr1", tcp4(40000, 6789), svcMon, ReasonNone},
		{"below_mon_msgr1", tcp4(40000, 6788), svcKernel, ReasonNone},
		{"above_mon_msgr1", tcp4(40000, 6790), svcKernel, ReasonNone},
		{"osd_first_port", tcp4(40000, 6800), svcOSD, ReasonNone},
		{"osd_last_port", tcp4(40000, 7568), svcOSD, ReasonNone},
		{"below_osd", tcp4(40000, 6799), svcKernel, ReasonNone},
		{"above_osd", tcp4(40000, 7569), svcKernel, ReasonNone},
		{"osd_reply_to_client", tcp4(6800, 51000), svcOSD, ReasonNone},
		{"osd_reply_last_port", tcp4(7568, 51000), svcOSD, ReasonNone},
		{"not_osd_reply", tcp4(7569, 51000), svcKernel, ReasonNone},
		{"ssh", tcp4(51000, 22), svcKernel, ReasonNone},
		{"roce", udp4(49152, 4791), svcRoCE, ReasonNone},
		{"udp_4790", udp4(49152, 4790), svcKernel, ReasonNone},
		{"udp_to_osd_port", udp4(49152, 6800), svcKernel, ReasonNone},
		{"tcp_to_roce_port", tcp4(49152, 4791), svcKernel, ReasonNone},
		{"arp_for_roce_ip", arp(roceIP), svcRoCE, ReasonNone},
		{"arp_for_other_ip", arp(ip4A), svcKernel, ReasonNone},
		{"icmp", frames["ipv4_icmp"], svcKernel, ReasonNone},
		{"ipv6_mon_in_qinq", frames["qinq_ipv6_tcp"], svcMon, ReasonNone},
		{"ipv6_mon_behind_ext_headers", frames["ipv6_hbh_routing_destopts_tcp"], svcMon, ReasonNone},
		{"ipv6_osd_atomic_fragment", frames["ipv6_atomic_fragment_tcp"], svcOSD, ReasonNone},
		{"ipv6_roce_behind_ah", frames["ipv6_ah_udp"], svcRoCE, ReasonNone},
		{"vlan_roce", frames["vlan_ipv4_udp"], svcRoCE, ReasonNone},
		{"first_fragment_to_osd", frames["ipv4_first_fragment_tcp"], svcOSD, ReasonNone},
		// Its first bytes read as ports 3300 → 6800, but it has none.
		{"later_fragment", frames["ipv4_later_fragment"], svcKernel, ReasonNone},
		{"ipv6_later_fragment", frames["ipv6_later_fragment"], svcKernel, ReasonNone},
		{"arp_in_two_vlans", frames["double_dot1q_arp"], svcRoCE, ReasonNone},
		{"unknown_ethertype", frames["unknown_ethertype"], svcKernel, ReasonNone},
		{"rxe_cm_request", frames["rxe_cm_request"], svcRoCE, ReasonNone},
		{"rxe_send", frames["rxe_send"], svcRoCE, ReasonNone},
		{"rxe_ack", frames["rxe_ack"], svcRoCE, ReasonNone},
		{"rxe_icmp_port_unreachable", frames["rxe_icmp_port_unreachable"], svcKernel, ReasonNone},
		{"truncated_mon", tcp4(40000, 3300)[:40], svcKernel, ReasonTruncatedIPv4},
		{"bad_tcp_to_mon", patch(tcp4(40000, 3300), 34+12, 0x30), svcKernel, ReasonBadTCPHeader},
		{"runt", []byte{1, 2, 3}, svcKernel, ReasonTruncatedEthernet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.frame == nil {
				t.Fatal("no frame")
			}
			service, reason := c.Classify(tt.frame)
			if service != tt.service || reason != tt.reason {
				t.Errorf("Classify = %d, %v; want %d, %v", service, reason, tt.service, tt.reason)
			}
			var h Headers
			if Parse(tt.frame, &h) == ReasonNone {
				_, rule := c.Match(&h)
				if want := refMatch(cephRules(), &h); rule != want {
					t.Errorf("Match rule %d, reference %d", rule, want)
				}
			}
		})
	}
}

// hdr builds headers for Match tests: an IP packet when dst is an IP
// address and proto is nonzero.
func hdr(et uint16, proto uint8, dst netip.Addr, ports ...uint16) *Headers {
	h := &Headers{EtherType: et, Proto: proto, Dst: dst}
	switch et {
	case EtherTypeIPv4:
		h.IPVersion = 4
	case EtherTypeIPv6:
		h.IPVersion = 6
	}
	if len(ports) == 2 {
		h.HasPorts, h.SrcPort, h.DstPort = true, ports[0], ports[1]
	}
	return h
}

func pfx(s string) []netip.Prefix {
	var ps []netip.Prefix
	for _, f := range strings.Fields(s) {
		ps = append(ps, netip.MustParsePrefix(f))
	}
	return ps
}

func TestMatch(t *testing.T) {
	ip := netip.MustParseAddr
	type check struct {
		h    *Headers
		rule int // -1: the default service
	}
	tests := []struct {
		name   string
		rules  []Rule
		checks []check
	}{
		{
			name: "first_match_wins",
			rules: []Rule{
				{Service: 1, Proto: ProtoTCP, DstPorts: []PortRange{{1, 100}}},
				{Service: 2, Proto: ProtoTCP, DstPorts: []PortRange{{50, 50}}},
				{Service: 3, Proto: ProtoTCP},
			},
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 9, 50), 0},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 9, 101), 2},
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 9, 50), -1},
			},
		},
		{
			name: "narrow_rule_first",
			rules: []Rule{
				{Service: 2, Proto: ProtoTCP, DstPorts: []PortRange{{50, 50}}},
				{Service: 1, Proto: ProtoTCP, DstPorts: []PortRange{{1, 100}}},
			},
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 9, 50), 0},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 9, 49), 1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 9, 51), 1},
			},
		},
		{
			name: "inclusive_range_edges",
			rules: []Rule{
				{Service: 1, DstPorts: []PortRange{{0, 0}, {65535, 65535}}},
				{Service: 2, DstPorts: []PortRange{{1000, 1999}, {1500, 2500}}}, // overlapping ranges of one rule
				{Service: 3, SrcPorts: []PortRange{{0, 65535}}},
			},
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 7, 0), 0},
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 7, 65535), 0},
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 7, 1), 2},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 7, 999), 2},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 7, 1000), 1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 7, 1999), 1},
				{hdr(EtherTypeIPv6, ProtoTCP, ip6B, 7, 2000), 1},
				{hdr(EtherTypeIPv6, ProtoTCP, ip6B, 7, 2500), 1},
				{hdr(EtherTypeIPv6, ProtoTCP, ip6B, 7, 2501), 2},
				// Port rules need ports, even a rule accepting all of them.
				{hdr(EtherTypeIPv4, ProtoICMP, ip4B), -1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B), -1},
			},
		},
		{
			name: "src_and_dst_ports",
			rules: []Rule{
				{Service: 1, Proto: ProtoTCP, SrcPorts: []PortRange{{6800, 7568}}, DstPorts: []PortRange{{32768, 60999}}},
				{Service: 2, Proto: ProtoTCP, SrcPorts: []PortRange{{6800, 7568}}},
			},
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 6800, 32768), 0},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 7568, 60999), 0},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 7568, 61000), 1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 6799, 40000), -1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip4B, 40000, 6800), -1},
			},
		},
		{
			name: "prefixes",
			rules: []Rule{
				{Service: 1, DstPrefixes: pfx("10.1.0.0/16 fd00:1::/32")},
				{Service: 2, DstPrefixes: pfx("10.0.0.0/8")},
				{Service: 3, DstPrefixes: pfx("192.168.0.7/32 172.16.0.0/13 2001:db8::1/128 2001:db8:0:1::/127")},
				{Service: 4, DstPrefixes: pfx("::/0")},
				{Service: 5, DstPrefixes: pfx("0.0.0.0/0")},
			},
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoTCP, ip("10.1.255.255")), 0},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("10.2.0.0")), 1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("10.255.255.255")), 1},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("11.0.0.0")), 4},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("9.255.255.255")), 4},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("192.168.0.7")), 2},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("192.168.0.6")), 4},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("172.16.0.0")), 2},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("172.23.255.255")), 2},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("172.24.0.0")), 4},
				{hdr(EtherTypeIPv4, ProtoTCP, ip("172.15.255.255")), 4},
				{hdr(EtherTypeIPv6, ProtoUDP, ip("fd00:1:ffff::1")), 0},
				{hdr(EtherTypeIPv6, ProtoUDP, ip("fd00:2::1")), 3},
				{hdr(EtherTypeIPv6, ProtoUDP, ip("2001:db8::1")), 2},
				{hdr(EtherTypeIPv6, ProtoUDP, ip("2001:db8::2")), 3},
				{hdr(EtherTypeIPv6, ProtoUDP, ip("2001:db8:0:1::1")), 2},
				{hdr(EtherTypeIPv6, ProtoUDP, ip("2001:db8:0:1::2")), 3},
				// An IPv4-mapped IPv6 address is an IPv6 address.
				{hdr(EtherTypeIPv6, ProtoUDP, ip("::ffff:10.1.0.1")), 3},
				// The ARP target is the destination.
				{hdr(EtherTypeARP, 0, ip("10.1.2.3")), 0},
				// Frames without an address match no prefix rule.
				{hdr(EtherTypeARP, 0, netip.Addr{}), -1},
				{hdr(0x88b5, 0, netip.Addr{}), -1},
			},
		},
		{
			name: "mapped_prefix",
			rules: []Rule{
				{Service: 1, DstPrefixes: pfx("::ffff:10.0.0.0/104")},
			},
			checks: []check{
				{hdr(EtherTypeIPv6, ProtoUDP, ip("::ffff:10.1.0.1")), 0},
				{hdr(EtherTypeIPv4, ProtoUDP, ip("10.1.0.1")), -1},
			},
		},
		{
			name: "ethertype_and_proto",
			rules: []Rule{
				{Service: 1, EtherType: 0x88b5},
				{Service: 2, Proto: ProtoICMP},
				{Service: 3, EtherType: EtherTypeIPv6, Proto: ProtoICMPv6},
				{Service: 4, EtherType: EtherTypeARP},
				{Service: 5, EtherType: EtherTypeIPv4},
			},
			checks: []check{
				{hdr(0x88b5, 0, netip.Addr{}), 0},
				{hdr(0x88b6, 0, netip.Addr{}), -1},
				{hdr(EtherTypeIPv4, ProtoICMP, ip4B), 1},
				{hdr(EtherTypeIPv6, ProtoICMP, ip6B), 1},
				{hdr(EtherTypeIPv6, ProtoICMPv6, ip6B), 2},
				{hdr(EtherTypeIPv6, ProtoUDP, ip6B, 1, 2), -1},
				{hdr(EtherTypeARP, 0, ip4B), 3},
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 1, 2), 4},
				{hdr(EtherTypeIPv4, 50, ip4B), 4},
			},
		},
		{
			name: "ports_without_proto",
			rules: []Rule{
				{Service: 1, DstPorts: []PortRange{{4791, 4791}}},
			},
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 1, 4791), 0},
				{hdr(EtherTypeIPv6, ProtoTCP, ip6B, 1, 4791), 0},
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 4791, 1), -1},
			},
		},
		{
			name:  "no_rules",
			rules: nil,
			checks: []check{
				{hdr(EtherTypeIPv4, ProtoUDP, ip4B, 1, 4791), -1},
				{hdr(EtherTypeARP, 0, ip4B), -1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const def = 6
			c := mustCompile(t, tt.rules, 7, def)
			for _, ck := range tt.checks {
				service, rule := c.Match(ck.h)
				wantService := def
				if ck.rule >= 0 {
					wantService = tt.rules[ck.rule].Service
				}
				if rule != ck.rule || service != wantService {
					t.Errorf("Match(%+v) = service %d rule %d, want service %d rule %d", *ck.h, service, rule, wantService, ck.rule)
				}
				if ref := refMatch(tt.rules, ck.h); ref != ck.rule {
					t.Errorf("refMatch(%+v) = %d, want %d: the test is wrong", *ck.h, ref, ck.rule)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tcp := func(dst ...PortRange) Rule { return Rule{Service: 1, Proto: ProtoTCP, DstPorts: dst} }
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = tcp(PortRange{uint16(i), uint16(i)})
	}
	var hosts []netip.Prefix
	for x := range 20 {
		for y := range 256 {
			hosts = append(hosts, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(x), byte(y), 1}), 32))
		}
	}

	tests := []struct {
		name        string
		rules       []Rule
		numServices int
		def         int
		is          error
		index       int    // of the rule named, or -1
		msg         string // part of the message
	}{
		{"no_services", nil, 0, 0, ErrServiceRange, -1, "0 services"},
		{"default_negative", nil, 3, -1, ErrServiceRange, -1, "default service -1"},
		{"default_too_big", nil, 3, 3, ErrServiceRange, -1, "default service 3 not in [0, 3)"},
		{"too_many_rules", many, 3, 0, ErrTooManyRules, -1, "65 rules given, at most 64"},
		{"service_too_big", []Rule{tcp(), {Service: 3}}, 3, 0, ErrServiceRange, 1, "rule 1: service 3"},
		{"service_negative", []Rule{{Service: -1}}, 3, 0, ErrServiceRange, 0, "rule 0: service -1"},
		{"dst_lo_above_hi", []Rule{tcp(), tcp(), tcp(PortRange{1, 2}, PortRange{7000, 6800})}, 3, 0, ErrInvalidRule, 2,
			"rule 2: dst port range 1: lo 7000 > hi 6800"},
		{"src_lo_above_hi", []Rule{{Service: 1, SrcPorts: []PortRange{{2, 1}}}}, 3, 0, ErrInvalidRule, 0,
			"rule 0: src port range 0: lo 2 > hi 1"},
		{"ports_for_icmp", []Rule{{Service: 1, Proto: ProtoICMP, DstPorts: []PortRange{{1, 1}}}}, 3, 0, ErrInvalidRule, 0,
			"ports given for protocol 1"},
		{"vlan_ethertype", []Rule{{Service: 1, EtherType: EtherTypeVLAN}}, 3, 0, ErrInvalidRule, 0, "VLAN tag"},
		{"proto_with_arp", []Rule{{Service: 1, EtherType: EtherTypeARP, Proto: ProtoUDP}}, 3, 0, ErrInvalidRule, 0, "never match"},
		{"invalid_prefix", []Rule{{Service: 1, DstPrefixes: []netip.Prefix{{}}}}, 3, 0, ErrInvalidRule, 0, "dst prefix 0"},
		{"ipv6_prefix_with_arp", []Rule{{Service: 1, EtherType: EtherTypeARP, DstPrefixes: pfx("fd00::/8")}}, 3, 0,
			ErrInvalidRule, 0, "cannot match ethertype 0x0806"},
		{"ipv4_prefix_with_ipv6", []Rule{{Service: 1, EtherType: EtherTypeIPv6, DstPrefixes: pfx("10.0.0.0/8")}}, 3, 0,
			ErrInvalidRule, 0, "cannot match ethertype 0x86dd"},
		{"too_many_prefixes", []Rule{tcp(), {Service: 1, DstPrefixes: hosts}}, 3, 0, ErrInvalidRule, 1, "lookup nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.rules, tt.numServices, tt.def)
			if err == nil {
				t.Fatalf("Compile succeeded: %+v", c)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "classify: ") {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			var re *RuleError
			if errors.As(err, &re) != (tt.index >= 0) || (re != nil && re.Index != tt.index) {
				t.Errorf("error %q: RuleError %+v, want index %d", err, re, tt.index)
			}
			if tt.index >= 0 && !errors.Is(err, ErrInvalidRule) {
				t.Errorf("error %q is not ErrInvalidRule", err)
			}
		})
	}

	// The limits themselves are accepted.
	c := mustCompile(t, many[:MaxRules], 3, 0)
	if c.NumRules() != MaxRules || c.NumServices() != 3 || c.DefaultService() != 0 {
		t.Errorf("classifier reports %d rules, %d services, default %d", c.NumRules(), c.NumServices(), c.DefaultService())
	}
	if _, rule := c.Match(hdr(EtherTypeIPv4, ProtoTCP, ip4B, 1, MaxRules-1)); rule != MaxRules-1 {
		t.Errorf("port %d matched rule %d, want the last", MaxRules-1, rule)
	}
	mustCompile(t, []Rule{{Service: 1, DstPrefixes: hosts[:1024]}}, 3, 0)
}

// randomizer draws rules and headers from small pools of values so that
// rules overlap and frames hit them, with random bit flips to probe the
// edges of prefixes and ranges.
type randomizer struct{ r *rand.Rand }

var (
	poolAddr4 = []netip.Addr{ip4A, ip4B, netip.MustParseAddr("10.77.1.5"), netip.MustParseAddr("192.168.0.7"),
		netip.MustParseAddr("172.16.5.4"), netip.MustParseAddr("10.0.0.1")}
	poolAddr6 = []netip.Addr{ip6A, ip6B, netip.MustParseAddr("fd00:77:1::5"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("::ffff:10.77.0.11"), netip.MustParseAddr("fe80::1")}
	poolPorts      = []uint16{0, 1, 22, 3300, 4791, 6789, 6800, 7000, 7568, 32768, 40000, 65535}
	poolEtherTypes = []uint16{EtherTypeIPv4, EtherTypeIPv6, EtherTypeARP, 0x88b5, 0x88cc}
	poolProtos     = []uint8{ProtoTCP, ProtoUDP, ProtoICMP, ProtoICMPv6, 50}
)

func (z randomizer) port() uint16 {
	p := poolPorts[z.r.IntN(len(poolPorts))]
	switch z.r.IntN(4) {
	case 0:
		return p + 1
	case 1:
		return p - 1
	case 2:
		return uint16(z.r.Uint32())
	}
	return p
}

func (z randomizer) ranges() []PortRange {
	var rs []PortRange
	for range z.r.IntN(4) {
		lo := z.port()
		span := []int{0, 0, 1, 10, 1000, 65535}[z.r.IntN(6)]
		rs = append(rs, PortRange{lo, uint16(min(int(lo)+span, 65535))})
	}
	return rs
}

func (z randomizer) addr(v6 bool) netip.Addr {
	pool := poolAddr4
	if v6 {
		pool = poolAddr6
	}
	a := pool[z.r.IntN(len(pool))]
	if z.r.IntN(2) == 0 {
		return a
	}
	b := a.AsSlice()
	bit := z.r.IntN(len(b) * 8)
	b[bit/8] ^= 0x80 >> (bit % 8)
	a, _ = netip.AddrFromSlice(b)
	return a
}

func (z randomizer) rule(numServices int) Rule {
	r := Rule{Service: z.r.IntN(numServices)}
	if z.r.IntN(3) == 0 {
		r.EtherType = poolEtherTypes[z.r.IntN(len(poolEtherTypes))]
	}
	ip := r.EtherType == 0 || r.EtherType == EtherTypeIPv4 || r.EtherType == EtherTypeIPv6
	if ip && z.r.IntN(2) == 0 {
		r.Proto = poolProtos[z.r.IntN(len(poolProtos))]
	}
	if ip && (r.Proto == 0 || r.Proto == ProtoTCP || r.Proto == ProtoUDP) {
		r.DstPorts = z.ranges()
		if z.r.IntN(2) == 0 {
			r.SrcPorts = z.ranges()
		}
	}
	if r.EtherType == 0 || r.EtherType == EtherTypeIPv4 || r.EtherType == EtherTypeIPv6 || r.EtherType == EtherTypeARP {
		for range z.r.IntN(4) {
			v6 := z.r.IntN(2) == 0
			switch r.EtherType {
			case EtherTypeIPv4, EtherTypeARP:
				v6 = false
			case EtherTypeIPv6:
				v6 = true
			}
			a := z.addr(v6)
			bits := a.BitLen() - z.r.IntN(a.BitLen()/4) // mostly long prefixes,
			if z.r.IntN(4) == 0 {
				bits = z.r.IntN(a.BitLen() + 1) // some of any length
			}
			r.DstPrefixes = append(r.DstPrefixes, netip.PrefixFrom(a, bits))
		}
	}
	return r
}

func (z randomizer) headers() *Headers {
	h := &Headers{EtherType: poolEtherTypes[z.r.IntN(len(poolEtherTypes))]}
	switch h.EtherType {
	case EtherTypeIPv4, EtherTypeIPv6:
		h.IPVersion = 4
		if h.EtherType == EtherTypeIPv6 {
			h.IPVersion = 6
		}
		h.Proto = poolProtos[z.r.IntN(len(poolProtos))]
		if z.r.IntN(4) == 0 {
			h.Proto = uint8(z.r.Uint32())
		}
		h.Dst = z.addr(h.IPVersion == 6)
		if (h.Proto == ProtoTCP || h.Proto == ProtoUDP) && z.r.IntN(8) != 0 {
			h.HasPorts, h.SrcPort, h.DstPort = true, z.port(), z.port()
		}
	case EtherTypeARP:
		if z.r.IntN(8) != 0 {
			h.Dst = z.addr(false)
		}
	}
	return h
}

// frame serializes random headers, sometimes inside VLAN tags and
// sometimes with a byte flipped.
func (z randomizer) frame(tb testing.TB) []byte {
	h := z.headers()
	et := layers.EthernetType(h.EtherType)
	var ls []gopacket.SerializableLayer
	switch z.r.IntN(4) {
	case 0:
		ls = append(ls, ethernet(layers.EthernetTypeDot1Q), dot1q(5, et))
	case 1:
		ls = append(ls, ethernet(layers.EthernetTypeQinQ), dot1q(5, layers.EthernetTypeDot1Q), dot1q(6, et))
	default:
		ls = append(ls, ethernet(et))
	}
	proto := layers.IPProtocol(h.Proto)
	var nl gopacket.NetworkLayer
	switch h.IPVersion {
	case 4:
		ip := ipv4(proto)
		ip.DstIP = h.Dst.AsSlice()
		if z.r.IntN(6) == 0 {
			ip.Flags, ip.FragOffset = layers.IPv4MoreFragments, uint16(z.r.IntN(2))
		}
		ls, nl = append(ls, ip), ip
	case 6:
		ip := ipv6(proto)
		ip.DstIP = h.Dst.AsSlice()
		ls, nl = append(ls, ip), ip
		if z.r.IntN(4) == 0 {
			ip.NextHeader = layers.IPProtocolIPv6Fragment
			ls = append(ls, fragmentHeader(proto, uint16(z.r.IntN(2)), z.r.IntN(2) == 0))
		}
	default:
		if h.EtherType == EtherTypeARP {
			target := h.Dst
			if !target.IsValid() {
				target = ip4A
			}
			ls = append(ls, arpRequest(target))
		}
	}
	switch {
	case nl != nil && h.Proto == ProtoTCP:
		ls = append(ls, tcp(z.port(), z.port(), nl))
	case nl != nil && h.Proto == ProtoUDP:
		ls = append(ls, udp(z.port(), z.port(), nl))
	}
	ls = append(ls, rawLayer("payload!"))
	f := serialize(tb, ls...)
	if z.r.IntN(10) == 0 {
		f[z.r.IntN(len(f))] ^= byte(1 + z.r.IntN(255))
	}
	return f
}

// TestClassifierMatchesReference compiles random rule sets and checks that
// the lookup tables pick exactly the rule the linear reference picks.
func TestClassifierMatchesReference(t *testing.T) {
	z := randomizer{rand.New(rand.NewPCG(1, 2))}
	const numServices = 5
	sets, perSet := 150, 150
	if testing.Short() {
		sets = 30
	}
	var matched, deep, frames int
	for set := range sets {
		rules := make([]Rule, 1+z.r.IntN(MaxRules))
		for i := range rules {
			rules[i] = z.rule(numServices)
		}
		def := z.r.IntN(numServices)
		c, err := Compile(rules, numServices, def)
		if err != nil {
			t.Fatalf("set %d: Compile: %v", set, err)
		}
		check := func(h *Headers, what string) {
			service, rule := c.Match(h)
			want := refMatch(rules, h)
			wantService := def
			if want >= 0 {
				wantService = rules[want].Service
				matched++
				if want >= 16 {
					deep++
				}
			}
			if rule != want || service != wantService {
				t.Fatalf("set %d, %s %+v: Match = service %d rule %d, reference service %d rule %d\nrules: %s",
					set, what, *h, service, rule, wantService, want, fmtRules(rules))
			}
		}
		for range perSet {
			check(z.headers(), "headers")

			f := z.frame(t)
			var h Headers
			r := Parse(f, &h)
			service, reason := c.Classify(f)
			if reason != r {
				t.Fatalf("set %d, frame %x: Classify reason %v, Parse %v", set, f, reason, r)
			}
			frames++
			if r != ReasonNone {
				if service != def {
					t.Fatalf("set %d: malformed frame (%v) went to %d, not the default %d", set, r, service, def)
				}
				continue
			}
			check(&h, fmt.Sprintf("frame %x", f))
		}
	}
	// Guard against a vacuous pass: many lookups must hit a rule.
	// Guard against a vacuous pass: lookups must hit rules, deep ones
	// too, and miss them.
	total := sets*perSet + frames
	if matched < total/4 || matched > total*3/4 || deep < total/50 {
		t.Errorf("%d of %d lookups matched a rule, %d a rule past the 16th; the generator is off", matched, total, deep)
	}
	t.Logf("%d rule sets, %d lookups: %d matched a rule, %d a rule past the 16th", sets, total, matched, deep)
}

func fmtRules(rules []Rule) string {
	var b strings.Builder
	for i, r := range rules {
		fmt.Fprintf(&b, "\n  %d: %+v", i, r)
	}
	return b.String()
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	rules := cephRules()
	rules = append(rules, Rule{Service: svcRoCE, DstPrefixes: pfx("fd00:77::/64 10.77.0.0/24")})
	c := mustCompile(t, rules, numCephServices, svcKernel)
	var frames [][]byte
	for _, fc := range validFrames(t) {
		frames = append(frames, fc.frame, fc.frame[:len(fc.frame)/2])
	}
	var h Headers
	allocs := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			c.Classify(f)
			if Parse(f, &h) == ReasonNone {
				c.Match(&h)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("Classify allocates %v times per run of %d frames", allocs, len(frames))
	}
}

// TestPortTablesExhaustive compares every port against the reference, for
// tables of byte classes and, with many overlapping ranges, of 16-bit
// classes.
func TestPortTablesExhaustive(t *testing.T) {
	z := randomizer{rand.New(rand.NewPCG(3, 4))}
	for _, tc := range []struct {
		name        string
		rules       int
		rangesEach  int
		wideClasses bool
	}{
		{"byte_classes", 8, 3, false},
		{"wide_classes", MaxRules, 24, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := make([]Rule, tc.rules)
			for i := range rules {
				rules[i].Service = 1 + i%3
				for range tc.rangesEach {
					lo := uint16(z.r.Uint32())
					hi := uint16(min(int(lo)+z.r.IntN(3000), 65535))
					rules[i].DstPorts = append(rules[i].DstPorts, PortRange{lo, hi})
					rules[i].SrcPorts = append(rules[i].SrcPorts, PortRange{hi / 2, hi})
				}
			}
			c := mustCompile(t, rules, 4, 0)
			if wide := c.dstPorts.class16 != nil; wide != tc.wideClasses {
				t.Fatalf("dst port table uses 16-bit classes: %v, want %v", wide, tc.wideClasses)
			}
			h := hdr(EtherTypeIPv4, ProtoUDP, ip4B, 0, 0)
			for p := range 1 << 16 {
				for _, sp := range []uint16{uint16(p), 40000} {
					h.SrcPort, h.DstPort = sp, uint16(p)
					if _, rule := c.Match(h); rule != refMatch(rules, h) {
						t.Fatalf("ports %d→%d: rule %d, reference %d", sp, p, rule, refMatch(rules, h))
					}
				}
			}
		})
	}
}
