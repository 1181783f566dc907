package classify

import (
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// checkFastPath fails unless Classify gives frame the reason Parse gives it
// and the service Match gives its headers, and unless the fast path, when
// it takes the frame, picks the rule Match picks. It reports whether the
// fast path took the frame.
func checkFastPath(t *testing.T, c *Classifier, frame []byte) bool {
	t.Helper()
	frame = frame[:len(frame):len(frame)] // reslicing past the end panics
	var h Headers
	wantReason := Parse(frame, &h)
	wantService, wantRule := c.defaultService, -1
	if wantReason == ReasonNone {
		wantService, wantRule = c.Match(&h)
	}
	service, reason := c.Classify(frame)
	if service != wantService || reason != wantReason {
		t.Fatalf("frame %x: Classify = service %d, %v; Parse and Match: service %d, %v (headers %+v)",
			frame, service, reason, wantService, wantReason, h)
	}
	_, _, fast, m := c.classify(frame)
	if !fast {
		return false
	}
	if wantReason != ReasonNone {
		t.Fatalf("frame %x: fast path took a frame Parse rejects (%v)", frame, wantReason)
	}
	rule := bits.TrailingZeros64(m)
	if m == 0 {
		rule = -1
	}
	if rule != wantRule {
		t.Fatalf("frame %x: fast path mask %#x, Match picks rule %d (headers %+v)", frame, m, wantRule, h)
	}
	return true
}

// mutations returns frame with each of its first n bytes, in turn, set to
// values that break length and version fields: 0, 1, 7 (one below a UDP
// header), 0xff, one more and one less, and either nibble flipped.
func mutations(frame []byte, n int) [][]byte {
	var out [][]byte
	for i := range min(n, len(frame)) {
		x := frame[i]
		for _, v := range []byte{0, 1, 7, 0xff, x + 1, x - 1, x ^ 0x0f, x ^ 0xf0} {
			if v == x {
				continue
			}
			f := append([]byte(nil), frame...)
			f[i] = v
			out = append(out, f)
		}
	}
	return out
}

// fastPathRuleSets are rule sets that exercise each part of the fast
// path: folded and walked address tables of either family, constrained and
// unconstrained port dimensions, ethertype and protocol rules.
func fastPathRuleSets() map[string][]Rule {
	return map[string][]Rule{
		"daemon": daemonRules(),
		"ceph":   cephRules(),
		"bench":  benchRules(MaxRules),
		"fuzz": append(cephRules(),
			Rule{Service: svcRoCE, DstPrefixes: pfx("fd00:77::/64 10.77.1.0/24")},
			Rule{Service: svcMon, EtherType: 0x88b5},
			Rule{Service: svcOSD, Proto: ProtoICMPv6, DstPrefixes: pfx("fd00:77::12/128")},
			Rule{Service: svcOSD, Proto: ProtoUDP, SrcPorts: []PortRange{{0, 1023}}, DstPorts: []PortRange{{1024, 65535}}},
		),
		"sample_prefixes": {
			// The sample's node and peer addresses, so that the address
			// tables are walked and decide.
			{Service: svcMon, Proto: ProtoICMP, DstPrefixes: pfx("10.99.0.1/32")},
			{Service: svcOSD, DstPrefixes: pfx("10.99.0.0/28 fd99::/124")},
			{Service: svcRoCE, EtherType: EtherTypeARP, DstPrefixes: pfx("10.99.0.1/32")},
			{Service: svcRoCE, EtherType: EtherTypeIPv6, Proto: ProtoICMPv6},
			{Service: svcMon, DstPrefixes: pfx("0.0.0.0/0")},
		},
		"match_all":    {{Service: svcOSD}},
		"ethertype":    {{Service: svcMon, EtherType: EtherTypeARP}, {Service: svcOSD, EtherType: EtherTypeIPv6}},
		"udp_src_only": {{Service: svcRoCE, Proto: ProtoUDP, SrcPorts: []PortRange{{0, 1023}}}},
		"v6_zero_prefix": {
			{Service: svcMon, DstPrefixes: []netip.Prefix{netip.MustParsePrefix("::/0")}},
			{Service: svcOSD, Proto: ProtoTCP},
		},
	}
}

// TestClassifyFastPath checks the fast path against Parse and Match over
// the sample capture, every cut of the test frames, and the test frames
// with each header byte damaged, for rule sets using every kind of table.
func TestClassifyFastPath(t *testing.T) {
	sample := sampleFrames(t)
	var frames [][]byte
	for _, fc := range validFrames(t) {
		frames = append(frames, fc.frame)
		for n := range len(fc.frame) {
			frames = append(frames, fc.frame[:n])
		}
		frames = append(frames, mutations(fc.frame, 80)...)
	}
	for i, f := range sample {
		if i%20 == 0 {
			frames = append(frames, mutations(f, 80)...)
		}
	}
	for name, rules := range fastPathRuleSets() {
		t.Run(name, func(t *testing.T) {
			c := mustCompile(t, rules, numCephServices, svcKernel)
			fast := 0
			for _, f := range sample {
				if checkFastPath(t, c, f) {
					fast++
				}
			}
			// Guard against a vacuous pass, and against frames the
			// poll loop sees most leaving the fast path.
			if fast < len(sample)*9/10 {
				t.Errorf("fast path took %d of %d sample frames, want 90%%", fast, len(sample))
			}
			for _, f := range frames {
				checkFastPath(t, c, f)
			}
		})
	}
}

// TestClassifyFastPathRandom checks the fast path against Parse and Match
// for random rule sets and frames.
func TestClassifyFastPathRandom(t *testing.T) {
	z := randomizer{rand.New(rand.NewPCG(5, 6))}
	sets, perSet := 100, 300
	if testing.Short() {
		sets = 20
	}
	fast := 0
	for range sets {
		rules := make([]Rule, 1+z.r.IntN(MaxRules))
		for i := range rules {
			rules[i] = z.rule(numCephServices)
		}
		c := mustCompile(t, rules, numCephServices, z.r.IntN(numCephServices))
		for range perSet {
			if checkFastPath(t, c, z.frame(t)) {
				fast++
			}
		}
	}
	// The generator puts a quarter of frames in two VLAN tags and some
	// behind IPv6 fragment headers, which the fast path leaves to Parse.
	if total := sets * perSet; fast < total/2 {
		t.Errorf("fast path took %d of %d random frames", fast, total)
	}
}

// FuzzClassifyFast checks the fast path against Parse and Match for every
// rule set of fastPathRuleSets.
func FuzzClassifyFast(f *testing.F) {
	var classifiers []*Classifier
	for _, rules := range fastPathRuleSets() {
		classifiers = append(classifiers, mustCompile(f, rules, numCephServices, svcKernel))
	}
	for _, fc := range validFrames(f) {
		f.Add(fc.frame)
	}
	for i, frame := range sampleFrames(f) {
		if i%100 == 0 {
			f.Add(frame)
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, c := range classifiers {
			checkFastPath(t, c, frame)
		}
	})
}
