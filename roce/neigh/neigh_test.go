package neigh

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
)

var (
	ourMAC  = [6]byte{0x02, 0, 0, 0, 0, 0x0A}
	ourIP   = netip.MustParseAddr("10.77.0.1")
	peerMAC = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x11}
	peerIP  = netip.MustParseAddr("10.77.0.11")
	t0      = time.Unix(1_000_000, 0)
)

// sink collects the frames a table sends.
type sink struct {
	frames [][]byte
	fail   bool
}

func (s *sink) send(f []byte) error {
	if s.fail {
		return errors.New("link full")
	}
	s.frames = append(s.frames, append([]byte(nil), f...))
	return nil
}

func (s *sink) arps(t *testing.T) []ARP {
	t.Helper()
	out := make([]ARP, len(s.frames))
	for i, f := range s.frames {
		if err := ParseARP(f, &out[i]); err != nil {
			t.Fatalf("sent frame %d: %v", i, err)
		}
	}
	return out
}

func newTable(t *testing.T, mod func(*Config)) (*Table, *sink) {
	t.Helper()
	s := &sink{}
	cfg := Config{MAC: ourMAC, IP: ourIP, Send: s.send}
	if mod != nil {
		mod(&cfg)
	}
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb, s
}

func arpFrame(t testing.TB, a ARP) []byte {
	t.Helper()
	buf := make([]byte, MinFrameLen)
	n, err := BuildARP(buf, &a)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func whoHas(target netip.Addr, sender netip.Addr, senderMAC [6]byte) ARP {
	return ARP{
		DstMAC: broadcastMAC, SrcMAC: senderMAC, Op: OpRequest,
		SenderMAC: senderMAC, SenderIP: sender, TargetIP: target,
	}
}

func TestARPRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    ARP
	}{
		{"request", whoHas(ourIP, peerIP, peerMAC)},
		{"reply", ARP{DstMAC: peerMAC, SrcMAC: ourMAC, Op: OpReply, SenderMAC: ourMAC, SenderIP: ourIP, TargetMAC: peerMAC, TargetIP: peerIP}},
		{"vlan", ARP{DstMAC: broadcastMAC, SrcMAC: peerMAC, VLANs: header.Dot1Q(0x2064), Op: OpRequest, SenderMAC: peerMAC, SenderIP: peerIP, TargetIP: ourIP}},
		{"qinq", ARP{DstMAC: broadcastMAC, SrcMAC: peerMAC, VLANs: header.QinQ(0x00c8, 0x2064), Op: OpRequest, SenderMAC: peerMAC, SenderIP: peerIP, TargetIP: ourIP}},
		{"802.1q over 802.1q", ARP{DstMAC: peerMAC, SrcMAC: ourMAC, Op: OpReply, SenderMAC: ourMAC, SenderIP: ourIP, TargetMAC: peerMAC, TargetIP: peerIP,
			VLANs: header.VLANs{N: 2, Tags: [header.MaxVLANs]header.VLANTag{{TPID: header.EtherTypeVLAN, TCI: 10}, {TPID: header.EtherTypeVLAN, TCI: 20}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := arpFrame(t, tc.a)
			if len(f) != MinFrameLen {
				t.Errorf("frame of %d bytes, want %d", len(f), MinFrameLen)
			}
			var got ARP
			if err := ParseARP(f, &got); err != nil {
				t.Fatal(err)
			}
			if got != tc.a {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tc.a)
			}
		})
	}
}

// threeTags returns a as a frame with one VLAN tag more than header
// allows.
func threeTags(t testing.TB, a ARP) []byte {
	t.Helper()
	a.VLANs = header.QinQ(200, 100)
	f := arpFrame(t, a)
	return append(append(f[:12:12], 0x81, 0x00, 0x00, 0x07), f[12:]...)
}

func TestParseARPErrors(t *testing.T) {
	good := arpFrame(t, whoHas(ourIP, peerIP, peerMAC))
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"short ethernet", good[:13], ErrTruncated},
		{"short arp", good[:14+27], ErrTruncated},
		{"ipv4", mod(func(b []byte) { b[12], b[13] = 0x08, 0x00 }), ErrNotARP},
		{"vlan short", mod(func(b []byte) { b[12], b[13] = 0x81, 0x00 })[:16], ErrTruncated},
		{"qinq short", arpFrame(t, ARP{VLANs: header.QinQ(1, 2), SenderIP: peerIP, TargetIP: ourIP})[:20], ErrTruncated},
		{"three tags", threeTags(t, whoHas(ourIP, peerIP, peerMAC)), header.ErrTooManyVLANs},
		{"hardware type", mod(func(b []byte) { b[15] = 6 }), ErrUnsupported},
		{"protocol", mod(func(b []byte) { b[16] = 0x86 }), ErrUnsupported},
		{"address length", mod(func(b []byte) { b[19] = 6 }), ErrUnsupported},
		// Addresses that do not fit in the frame: a truncated ARP packet,
		// as the classifier calls it (classify.ReasonTruncatedARP), not
		// just an unsupported one.
		{"address length beyond the frame", mod(func(b []byte) { b[19] = 16 }), ErrTruncated},
		{"operation", mod(func(b []byte) { b[21] = 3 }), ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a ARP
			if err := ParseARP(tc.frame, &a); !errors.Is(err, tc.want) {
				t.Errorf("ParseARP = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := BuildARP(make([]byte, 59), &ARP{SenderIP: ourIP, TargetIP: peerIP}); !errors.Is(err, ErrTruncated) {
		t.Errorf("BuildARP into 59 bytes = %v", err)
	}
	if _, err := BuildARP(make([]byte, 60), &ARP{SenderIP: netip.IPv6Loopback(), TargetIP: peerIP}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("BuildARP with ipv6 = %v", err)
	}
}

func TestHandleFrame(t *testing.T) {
	other := netip.MustParseAddr("10.77.0.99")
	for _, tc := range []struct {
		name      string
		in        ARP
		wantReply bool
		wantLearn bool
	}{
		{"who-has us", whoHas(ourIP, peerIP, peerMAC), true, true},
		{"who-has us tagged", func() ARP { a := whoHas(ourIP, peerIP, peerMAC); a.VLANs = header.Dot1Q(100); return a }(), true, true},
		{"who-has us qinq", func() ARP { a := whoHas(ourIP, peerIP, peerMAC); a.VLANs = header.QinQ(200, 100); return a }(), true, true},
		{"who-has other", whoHas(other, peerIP, peerMAC), false, false},
		{"probe for us", whoHas(ourIP, netip.IPv4Unspecified(), peerMAC), true, false},
		{"conflict", whoHas(ourIP, ourIP, peerMAC), false, false},
		{"reply to us", ARP{DstMAC: ourMAC, SrcMAC: peerMAC, Op: OpReply, SenderMAC: peerMAC, SenderIP: peerIP, TargetMAC: ourMAC, TargetIP: ourIP}, false, true},
		{"unicast between others", ARP{DstMAC: [6]byte{2, 9, 9, 9, 9, 9}, SrcMAC: peerMAC, Op: OpRequest, SenderMAC: peerMAC, SenderIP: peerIP, TargetIP: ourIP}, false, false},
		{"multicast sender", whoHas(ourIP, peerIP, [6]byte{1, 0, 0x5e, 0, 0, 1}), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, s := newTable(t, nil)
			if !tb.HandleFrame(arpFrame(t, tc.in), t0) {
				t.Fatal("arp frame not recognised")
			}
			sent := s.arps(t)
			if got := len(sent) == 1; got != tc.wantReply {
				t.Fatalf("sent %d frames, want reply %v", len(sent), tc.wantReply)
			}
			if tc.wantReply {
				r := sent[0]
				want := ARP{
					DstMAC: tc.in.SenderMAC, SrcMAC: ourMAC, VLANs: tc.in.VLANs, Op: OpReply,
					SenderMAC: ourMAC, SenderIP: ourIP, TargetMAC: tc.in.SenderMAC, TargetIP: tc.in.SenderIP,
				}
				if r != want {
					t.Errorf("reply:\n got %+v\nwant %+v", r, want)
				}
			}
			mac, ok := tb.Lookup(tc.in.SenderIP, t0)
			if ok != tc.wantLearn || ok && mac != tc.in.SenderMAC {
				t.Errorf("Lookup(%v) = %v, %v; want learned %v", tc.in.SenderIP, mac, ok, tc.wantLearn)
			}
		})
	}
	t.Run("not arp", func(t *testing.T) {
		tb, _ := newTable(t, nil)
		f := arpFrame(t, whoHas(ourIP, peerIP, peerMAC))
		f[13] = 0x00 // IPv4
		if tb.HandleFrame(f, t0) {
			t.Error("non-ARP frame consumed")
		}
	})
	t.Run("too many tags", func(t *testing.T) {
		// Not ARP as far as the table goes: the caller counts it.
		tb, s := newTable(t, nil)
		if tb.HandleFrame(threeTags(t, whoHas(ourIP, peerIP, peerMAC)), t0) || len(s.frames) != 0 || tb.Len() != 0 {
			t.Error("frame with three tags consumed")
		}
	})
	t.Run("refresh known only", func(t *testing.T) {
		tb, _ := newTable(t, nil)
		tb.Learn(peerIP, peerMAC, t0)
		newMAC := [6]byte{0x52, 0x54, 0, 0, 0, 0x99}
		tb.HandleFrame(arpFrame(t, whoHas(netip.MustParseAddr("10.77.0.50"), peerIP, newMAC)), t0.Add(time.Second))
		if mac, _ := tb.Lookup(peerIP, t0); mac != newMAC {
			t.Errorf("known neighbour not updated from ARP about another host: %v", mac)
		}
		stranger := netip.MustParseAddr("10.77.0.51")
		tb.HandleFrame(arpFrame(t, whoHas(netip.MustParseAddr("10.77.0.50"), stranger, newMAC)), t0)
		if _, ok := tb.Lookup(stranger, t0); ok {
			t.Error("unknown host learned from ARP not addressed to us")
		}
		if st := tb.Stats(); st.Changed != 1 || st.Learned != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestResolveRetriesThenFails(t *testing.T) {
	const probes = 4
	tb, s := newTable(t, func(c *Config) { c.MaxProbes = probes; c.RetransTime = 500 * time.Millisecond })
	var gotErr error
	calls := 0
	if err := tb.Resolve(peerIP, t0, func(_ [6]byte, err error) { calls++; gotErr = err }); err != nil {
		t.Fatal(err)
	}
	// A second caller joins the same resolution.
	if err := tb.Resolve(peerIP, t0, func(_ [6]byte, err error) { calls++ }); err != nil {
		t.Fatal(err)
	}
	now := t0
	for i := 0; i < 20 && calls == 0; i++ {
		d, ok := tb.NextDeadline()
		if !ok {
			t.Fatal("no deadline while resolving")
		}
		if d.Before(now) {
			t.Fatalf("deadline %v before now %v", d, now)
		}
		now = d
		tb.Poll(now)
	}
	if calls != 2 || !errors.Is(gotErr, ErrUnreachable) {
		t.Fatalf("%d calls, err %v; want 2 calls with ErrUnreachable", calls, gotErr)
	}
	if got := now.Sub(t0); got != probes*500*time.Millisecond {
		t.Errorf("failed after %v, want %v", got, probes*500*time.Millisecond)
	}
	sent := s.arps(t)
	if len(sent) != probes {
		t.Fatalf("%d probes, want %d", len(sent), probes)
	}
	for _, a := range sent {
		if a.Op != OpRequest || a.DstMAC != broadcastMAC || a.TargetIP != peerIP || a.SenderIP != ourIP || a.SenderMAC != ourMAC {
			t.Errorf("probe %+v", a)
		}
	}
	if _, ok := tb.NextDeadline(); ok {
		t.Error("deadline left after failure")
	}
	if st := tb.Stats(); st.Failed != 2 || st.Pending != 0 || st.RequestsSent != probes {
		t.Errorf("stats %+v", st)
	}
}

func TestResolveAnswered(t *testing.T) {
	tb, s := newTable(t, nil)
	var got [6]byte
	calls := 0
	if err := tb.Resolve(peerIP, t0, func(mac [6]byte, err error) {
		if err != nil {
			t.Error(err)
		}
		got = mac
		calls++
	}); err != nil {
		t.Fatal(err)
	}
	reply := ARP{DstMAC: ourMAC, SrcMAC: peerMAC, Op: OpReply, SenderMAC: peerMAC, SenderIP: peerIP, TargetMAC: ourMAC, TargetIP: ourIP}
	tb.HandleFrame(arpFrame(t, reply), t0.Add(time.Millisecond))
	if calls != 0 {
		t.Fatal("done ran inside HandleFrame")
	}
	if !tb.Ready() {
		t.Error("Ready false with an answer waiting")
	}
	tb.Poll(t0.Add(time.Millisecond))
	if calls != 1 || got != peerMAC {
		t.Fatalf("done ran %d times with %v", calls, got)
	}
	// Now cached: no probe, answer from the next Poll.
	before := len(s.frames)
	calls = 0
	tb.Resolve(peerIP, t0.Add(2*time.Millisecond), func(mac [6]byte, err error) { calls++; got = mac })
	if calls != 0 {
		t.Fatal("done ran inside Resolve")
	}
	tb.Poll(t0.Add(2 * time.Millisecond))
	if calls != 1 || got != peerMAC || len(s.frames) != before {
		t.Errorf("cached resolve: %d calls, %v, %d new frames", calls, got, len(s.frames)-before)
	}
}

func TestResolveLearnsFromTraffic(t *testing.T) {
	tb, _ := newTable(t, nil)
	calls := 0
	tb.Resolve(peerIP, t0, func(mac [6]byte, err error) {
		if err != nil || mac != peerMAC {
			t.Errorf("done(%v, %v)", mac, err)
		}
		calls++
	})
	tb.Learn(peerIP, peerMAC, t0) // a RoCE frame from the peer
	tb.Poll(t0)
	if calls != 1 {
		t.Errorf("done ran %d times", calls)
	}
}

func TestResolveErrors(t *testing.T) {
	tb, _ := newTable(t, func(c *Config) { c.MaxPending = 2 })
	for _, ip := range []netip.Addr{ourIP, netip.IPv4Unspecified(), netip.MustParseAddr("224.0.0.1"), netip.MustParseAddr("fe80::1"), {}} {
		if err := tb.Resolve(ip, t0, nil); !errors.Is(err, ErrInvalidAddress) {
			t.Errorf("Resolve(%v) = %v", ip, err)
		}
	}
	tb.Resolve(peerIP, t0, nil)
	tb.Resolve(netip.MustParseAddr("10.77.0.12"), t0, nil)
	if err := tb.Resolve(netip.MustParseAddr("10.77.0.13"), t0, nil); !errors.Is(err, ErrPendingFull) {
		t.Errorf("third Resolve = %v, want ErrPendingFull", err)
	}
	if _, err := New(Config{IP: netip.MustParseAddr("fe80::1"), Send: func([]byte) error { return nil }}); !errors.Is(err, ErrInvalidAddress) {
		t.Errorf("New with ipv6 = %v", err)
	}
	if _, err := New(Config{IP: ourIP}); !errors.Is(err, ErrInvalidAddress) {
		t.Errorf("New without Send = %v", err)
	}
}

func TestExpiry(t *testing.T) {
	const reach = 10 * time.Second
	tb, _ := newTable(t, func(c *Config) { c.ReachableTime = reach })
	tb.Poll(t0)
	tb.Learn(peerIP, peerMAC, t0)
	if _, ok := tb.Lookup(peerIP, t0.Add(reach-time.Nanosecond)); !ok {
		t.Error("entry gone before ReachableTime")
	}
	if _, ok := tb.Lookup(peerIP, t0.Add(reach)); ok {
		t.Error("entry valid at ReachableTime")
	}
	// Traffic keeps it alive: Learn within the refresh interval is
	// skipped, later ones extend the entry.
	tb.Learn(peerIP, peerMAC, t0.Add(reach/2))
	if _, ok := tb.Lookup(peerIP, t0.Add(reach+time.Second)); !ok {
		t.Error("refreshed entry expired")
	}
	tb.Poll(t0.Add(3 * reach))
	if tb.Len() != 0 {
		t.Errorf("%d entries after sweep", tb.Len())
	}
	if st := tb.Stats(); st.Expired != 1 || st.Entries != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestCapacity(t *testing.T) {
	tb, _ := newTable(t, func(c *Config) { c.MaxEntries = 2 })
	ips := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4")}
	for i, ip := range ips {
		tb.Learn(ip, [6]byte{2, 0, 0, 0, 0, byte(i)}, t0.Add(time.Duration(i)*time.Second))
	}
	if tb.Len() != 2 {
		t.Fatalf("%d entries, max 2", tb.Len())
	}
	if _, ok := tb.Lookup(ips[2], t0.Add(3*time.Second)); ok {
		t.Error("traffic evicted an entry")
	}
	// An ARP request to us may evict: the oldest goes.
	tb.HandleFrame(arpFrame(t, whoHas(ourIP, ips[2], [6]byte{2, 0, 0, 0, 0, 2})), t0.Add(3*time.Second))
	_, ok0 := tb.Lookup(ips[0], t0.Add(3*time.Second))
	_, ok2 := tb.Lookup(ips[2], t0.Add(3*time.Second))
	if ok0 || !ok2 || tb.Len() != 2 {
		t.Errorf("after eviction: oldest present %v, new present %v, %d entries", ok0, ok2, tb.Len())
	}
}

func TestAnnounce(t *testing.T) {
	tb, s := newTable(t, func(c *Config) { c.Announce = true })
	tb.Poll(t0)
	tb.Poll(t0.Add(time.Second))
	sent := s.arps(t)
	if len(sent) != 1 || sent[0].SenderIP != ourIP || sent[0].TargetIP != ourIP || sent[0].DstMAC != broadcastMAC {
		t.Errorf("announcements %+v", sent)
	}
}

func TestSendErrorsCounted(t *testing.T) {
	tb, s := newTable(t, nil)
	s.fail = true
	tb.HandleFrame(arpFrame(t, whoHas(ourIP, peerIP, peerMAC)), t0)
	if st := tb.Stats(); st.SendErrors != 1 || st.RepliesSent != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestNoAllocs: answering who-has and learning from traffic allocate
// nothing once the neighbour is known.
func TestNoAllocs(t *testing.T) {
	tb, err := New(Config{MAC: ourMAC, IP: ourIP, Send: func([]byte) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	req := arpFrame(t, whoHas(ourIP, peerIP, peerMAC))
	now := t0
	tb.HandleFrame(req, now)
	if a := testing.AllocsPerRun(1000, func() { now = now.Add(time.Millisecond); tb.HandleFrame(req, now) }); a != 0 {
		t.Errorf("HandleFrame: %v allocations", a)
	}
	if a := testing.AllocsPerRun(1000, func() { now = now.Add(time.Second); tb.Learn(peerIP, peerMAC, now) }); a != 0 {
		t.Errorf("Learn: %v allocations", a)
	}
	var a ARP
	if n := testing.AllocsPerRun(1000, func() { ParseARP(req, &a) }); n != 0 {
		t.Errorf("ParseARP: %v allocations", n)
	}
}

func BenchmarkLearn(b *testing.B) {
	tb, _ := New(Config{MAC: ourMAC, IP: ourIP, Send: func([]byte) error { return nil }})
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		tb.Learn(peerIP, peerMAC, now)
	}
}

func BenchmarkHandleWhoHas(b *testing.B) {
	tb, _ := New(Config{MAC: ourMAC, IP: ourIP, Send: func([]byte) error { return nil }})
	req := arpFrame(b, whoHas(ourIP, peerIP, peerMAC))
	b.ReportAllocs()
	for b.Loop() {
		tb.HandleFrame(req, t0)
	}
}

// kernel is a Config.Kernel that answers what the test tells it to.
type kernel struct {
	asked   []netip.Addr
	answers []struct {
		ip  netip.Addr
		mac [6]byte
	}
}

func (k *kernel) Request(ip netip.Addr) bool { k.asked = append(k.asked, ip); return true }

func (k *kernel) Next() (netip.Addr, [6]byte, bool) {
	if len(k.answers) == 0 {
		return netip.Addr{}, [6]byte{}, false
	}
	a := k.answers[0]
	k.answers = k.answers[1:]
	return a.ip, a.mac, true
}

func (k *kernel) answer(ip netip.Addr, mac [6]byte) {
	k.answers = append(k.answers, struct {
		ip  netip.Addr
		mac [6]byte
	}{ip, mac})
}

// With a kernel table, a resolution asks the kernel at each
// retransmission instead of broadcasting, takes its answer, and still
// fails after MaxProbes unanswered asks.
func TestResolveThroughKernel(t *testing.T) {
	k := &kernel{}
	tb, s := newTable(t, func(c *Config) { c.Kernel = k })
	var got [6]byte
	var gotErr error
	calls := 0
	done := func(mac [6]byte, err error) { got, gotErr = mac, err; calls++ }
	if err := tb.Resolve(peerIP, t0, done); err != nil {
		t.Fatal(err)
	}
	tb.Poll(t0.Add(DefaultRetransTime))
	if len(s.frames) != 0 {
		t.Fatalf("sent %d frames: want none, the kernel resolves", len(s.frames))
	}
	if len(k.asked) != 2 || k.asked[0] != peerIP {
		t.Fatalf("asked the kernel %v: want %v twice (first ask, one retransmission)", k.asked, peerIP)
	}
	k.answer(netip.MustParseAddr("10.77.0.99"), [6]byte{0x52, 0, 0, 0, 0, 0x99}) // another address: learned, not ours
	k.answer(peerIP, peerMAC)
	tb.Poll(t0.Add(DefaultRetransTime + time.Millisecond))
	if calls != 1 || gotErr != nil || got != peerMAC {
		t.Fatalf("resolve: %d calls, %v %v; want one with %v", calls, got, gotErr, peerMAC)
	}
	if mac, ok := tb.Lookup(peerIP, t0.Add(2*time.Second)); !ok || mac != peerMAC {
		t.Fatalf("lookup after the kernel's answer: %v %v", mac, ok)
	}
	if st := tb.Stats(); st.KernelRequests != 2 || st.RequestsSent != 0 || st.Learned != 2 {
		t.Fatalf("stats %+v: want 2 kernel requests, no who-has, 2 learned", st)
	}

	// Unanswered: fails after MaxProbes asks, as a broadcast would.
	other := netip.MustParseAddr("10.77.0.12")
	calls, gotErr = 0, nil
	if err := tb.Resolve(other, t0, done); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= DefaultMaxProbes; i++ {
		tb.Poll(t0.Add(time.Duration(i) * DefaultRetransTime))
	}
	if calls != 1 || !errors.Is(gotErr, ErrUnreachable) {
		t.Fatalf("unanswered: %d calls, err %v; want ErrUnreachable", calls, gotErr)
	}
	if len(s.frames) != 0 {
		t.Fatalf("sent %d frames: want none", len(s.frames))
	}
}
