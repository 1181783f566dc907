package classify

import (
	"bytes"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must not panic, must report
// offsets inside the frame and a known reason, and must agree with itself
// when the frame loses its link padding.
func FuzzParse(f *testing.F) {
	for _, fc := range validFrames(f) {
		f.Add(fc.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := bytes.Clone(frame)
		frame = frame[:len(frame):len(frame)] // reslicing past the end panics
		var h Headers
		r := Parse(frame, &h)
		if r >= NumReasons {
			t.Fatalf("reason %d out of range", r)
		}
		if !bytes.Equal(frame, orig) {
			t.Fatal("Parse modified the frame")
		}
		checkOffsets(t, frame, &h, r)
		if r != ReasonNone {
			return
		}
		if h.HasPorts && (h.Proto != ProtoTCP && h.Proto != ProtoUDP || h.FragOffset != 0 || h.IPVersion == 0) {
			t.Fatalf("ports in headers %+v", h)
		}
		if h.IPVersion != 0 && (h.Dst.BitLen() != 32 && h.IPVersion == 4 || h.Dst.BitLen() != 128 && h.IPVersion == 6) {
			t.Fatalf("IPv%d packet with destination %v", h.IPVersion, h.Dst)
		}
		if h.IPVersion != 0 || h.EtherType == EtherTypeARP {
			// Everything past End is padding, not read.
			var cut Headers
			if r := Parse(frame[:h.End:h.End], &cut); r != ReasonNone || cut != h {
				t.Fatalf("frame cut at End %d: %v, headers %+v; want %+v", h.End, r, cut, h)
			}
		}
	})
}

// FuzzClassify checks the compiled Ceph node rules, plus prefix, ethertype
// and protocol rules, against the linear reference matcher.
func FuzzClassify(f *testing.F) {
	rules := append(cephRules(),
		Rule{Service: svcRoCE, DstPrefixes: pfx("fd00:77::/64 10.77.1.0/24")},
		Rule{Service: svcMon, EtherType: 0x88b5},
		Rule{Service: svcOSD, Proto: ProtoICMPv6, DstPrefixes: pfx("fd00:77::12/128")},
		Rule{Service: svcOSD, Proto: ProtoUDP, SrcPorts: []PortRange{{0, 1023}}, DstPorts: []PortRange{{1024, 65535}}},
	)
	c := mustCompile(f, rules, numCephServices, svcKernel)
	for _, fc := range validFrames(f) {
		f.Add(fc.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		frame = frame[:len(frame):len(frame)]
		service, reason := c.Classify(frame)
		var h Headers
		if r := Parse(frame, &h); r != reason {
			t.Fatalf("Classify reason %v, Parse %v", reason, r)
		}
		if reason != ReasonNone {
			if service != svcKernel {
				t.Fatalf("malformed frame (%v) went to service %d", reason, service)
			}
			return
		}
		want := svcKernel
		rule := refMatch(rules, &h)
		if rule >= 0 {
			want = rules[rule].Service
		}
		if service != want {
			t.Fatalf("headers %+v: Classify = %d, reference rule %d service %d", h, service, rule, want)
		}
		if s, r := c.Match(&h); s != want || r != rule {
			t.Fatalf("headers %+v: Match = %d rule %d, reference rule %d service %d", h, s, r, rule, want)
		}
	})
}
