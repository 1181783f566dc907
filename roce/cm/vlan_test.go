package cm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/neigh"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// tagger puts a node behind a VLAN: every frame it sends gets tags on the
// wire, and every frame it receives must carry exactly those tags, which
// it removes. It counts the frames that arrived without them.
type tagger struct {
	end      *memlink.End
	tags     header.VLANs
	out      [][]byte
	received int
	wrong    []string
}

func (g *tagger) SendBurst(frames [][]byte) int {
	g.out = g.out[:0]
	for _, f := range frames {
		e := header.Ethernet(f)
		b := make([]byte, len(f)+g.tags.Len())
		n := header.PutLink(b, e.Destination(), e.Source(), &g.tags, e.Type())
		copy(b[n:], f[header.EthernetHeaderLen:])
		g.out = append(g.out, b)
	}
	return g.end.SendBurst(g.out)
}

func (g *tagger) RecvBurst(frames [][]byte) int {
	k := g.end.RecvBurst(frames)
	for i, f := range frames[:k] {
		g.received++
		var l header.Link
		if err := header.ParseLink(f, &l); err != nil || l.VLANs != g.tags {
			g.wrong = append(g.wrong, fmt.Sprintf("%x (%v)", f[:min(len(f), 22)], err))
			continue
		}
		e := header.Ethernet(f)
		b := make([]byte, len(f)-g.tags.Len())
		header.PutLink(b, e.Destination(), e.Source(), &header.VLANs{}, l.EtherType)
		copy(b[header.EthernetHeaderLen:], f[l.Len:])
		frames[i] = b
	}
	return k
}

// A peer behind an 802.1Q tag or QinQ resolves the passive side with ARP,
// connects with rdma_cm, exchanges data and disconnects; every frame the
// passive side sends it (ARP reply, REP, ACKs, echoed data, DREP) carries
// the peer's tags.
func TestTaggedPeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags header.VLANs
	}{
		{"802.1q", header.Dot1Q(3<<13 | 100)},
		{"qinq", header.QinQ(200, 3<<13|100)},
		{"802.1q over 802.1q", header.VLANs{N: 2, Tags: [header.MaxVLANs]header.VLANTag{{TPID: header.EtherTypeVLAN, TCI: 10}, {TPID: header.EtherTypeVLAN, TCI: 20}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g *tagger
			n := newTestNetWrap(t, memlink.Config{Seed: 7}, testConfig(), testConfig(), func(la *memlink.End) roce.PacketIO {
				g = &tagger{end: la, tags: tc.tags}
				return g
			})
			n.b.listen(t, testPort)

			ca, sb := n.connect([]byte("tagged"))
			if qa := sb.qp.Query(); qa.AV.VLANs != tc.tags {
				t.Errorf("passive QP's address vector has tags %+v, want %+v", qa.AV.VLANs, tc.tags)
			}
			n.exchange(ca, pattern(20_000, 9))
			if err := n.a.m.Disconnect(ca.conn); err != nil {
				t.Fatal(err)
			}
			n.Run(1_000_000, func() bool { return ca.disconnected > 0 && sb.disconnected > 0 })
			n.Settle()
			if len(g.wrong) != 0 {
				t.Errorf("%d of %d frames to the tagged peer without its tags, first %s", len(g.wrong), g.received, g.wrong[0])
			}
			if g.received < 20 {
				t.Errorf("peer received %d frames", g.received)
			}
			// Every who-has answered, on the peer's VLAN.
			if st := n.b.m.Neigh().Stats(); st.RequestsReceived == 0 || st.RepliesSent != st.RequestsReceived {
				t.Errorf("passive ARP %+v", st)
			}
			if es := n.b.ep.Stats(); es.Malformed+es.NotRoCE+es.TooManyVLANs+es.NotLocal+es.NoQP != 0 {
				t.Errorf("passive endpoint dropped frames: %+v", es)
			}
			n.checkClean(n.a, "A")
			n.checkClean(n.b, "B")
		})
	}
}

// Frames the endpoint cannot take are counted by reason: more VLAN tags
// than the classifier passes (RoCEv2 or ARP inside), and frames that are
// neither RoCEv2 nor ARP, which the neighbour table hands back.
func TestRefusedFramesCounted(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	threeTags := func(f []byte) []byte {
		return append(append(bytes.Clone(f[:12]), 0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3), f[12:]...)
	}
	arp := make([]byte, neigh.MinFrameLen)
	if _, err := neigh.BuildARP(arp, &neigh.ARP{
		DstMAC: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, SrcMAC: macA, Op: neigh.OpRequest,
		SenderMAC: macA, SenderIP: ipA, TargetIP: ipB,
	}); err != nil {
		t.Fatal(err)
	}
	roceFrame := make([]byte, 512)
	k, err := wire.BuildFrame(roceFrame, &wire.FrameHeader{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, TTL: 64, UDPSrc: 0xC000},
		&wire.Packet{BTH: wire.BTH{Opcode: wire.OpUDSendOnly, PKey: wire.DefaultPKey, DestQP: 1}, DETH: wire.DETH{QKey: wire.GSIQKey, SrcQP: 1}},
		rawReq(t, 1, 0x100, testPort))
	if err != nil {
		t.Fatal(err)
	}
	icmp := bytes.Clone(roceFrame[:k])
	icmp[14+9] = 1 // IPv4 protocol ICMP: well formed, not RoCE, not ARP
	if n.a.link.SendBurst([][]byte{threeTags(arp), threeTags(roceFrame[:k]), icmp}) != 3 {
		t.Fatal("link full")
	}
	n.Quiesce()
	es := n.b.ep.Stats()
	if es.TooManyVLANs != 2 || es.NotRoCE != 1 || es.Malformed != 0 || es.GSIReceived != 0 ||
		es.ICRCErrors != 0 || es.NotLocal != 0 || es.NoQP != 0 || es.Unsupported != 0 {
		t.Errorf("endpoint stats %+v: want 2 too_many_vlans, 1 not_roce and no other drop", es)
	}
	if st := n.b.m.Neigh().Stats(); st.RequestsReceived != 0 || st.RepliesSent != 0 || st.Malformed != 0 {
		t.Errorf("neighbour table saw a refused frame: %+v", st)
	}
}
