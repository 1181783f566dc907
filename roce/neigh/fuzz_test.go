package neigh

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/header"
)

func FuzzARP(f *testing.F) {
	f.Add(arpFrame(f, whoHas(ourIP, peerIP, peerMAC)))
	f.Add(arpFrame(f, ARP{DstMAC: ourMAC, SrcMAC: peerMAC, VLANs: header.Dot1Q(3), Op: OpReply, SenderMAC: peerMAC, SenderIP: peerIP, TargetMAC: ourMAC, TargetIP: ourIP}))
	f.Add(arpFrame(f, ARP{DstMAC: broadcastMAC, SrcMAC: peerMAC, VLANs: header.QinQ(200, 100), Op: OpRequest, SenderMAC: peerMAC, SenderIP: peerIP, TargetIP: ourIP}))
	f.Add(threeTags(f, whoHas(ourIP, peerIP, peerMAC)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x08, 0x06})
	f.Fuzz(func(t *testing.T, frame []byte) {
		var a ARP
		err := ParseARP(frame, &a)
		checkClassifierAgrees(t, frame, &a, err)
		if err == nil {
			buf := make([]byte, MinFrameLen)
			n, err := BuildARP(buf, &a)
			if err != nil {
				t.Fatalf("BuildARP of a parsed frame: %v", err)
			}
			var b ARP
			if err := ParseARP(buf[:n], &b); err != nil || a != b {
				t.Fatalf("round trip: %v\n%+v\n%+v", err, a, b)
			}
		}
		tb, err := New(Config{MAC: ourMAC, IP: ourIP, MaxEntries: 4, Send: func(f []byte) error {
			var r ARP
			if err := ParseARP(f, &r); err != nil {
				t.Fatalf("table sent an unparsable frame: %v", err)
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		tb.HandleFrame(frame, time.Unix(1, 0))
		if tb.Len() > 4 {
			t.Fatalf("%d entries, max 4", tb.Len())
		}
		if tb.Len() == 1 {
			if _, ok := tb.Lookup(netip.AddrFrom4([4]byte{}), time.Unix(1, 0)); ok {
				t.Fatal("learned 0.0.0.0")
			}
		}
	})
}

// checkClassifierAgrees fails unless the classifier reads an ARP frame
// that ParseARP accepts (err nil) as a well-formed ARP packet with the
// same addresses, and refuses one that ParseARP calls truncated or
// over-tagged: both read the frame by package header's rules.
func checkClassifierAgrees(t *testing.T, frame []byte, a *ARP, err error) {
	t.Helper()
	var h classify.Headers
	r := classify.Parse(frame, &h)
	switch {
	case err == nil:
		if r != classify.ReasonNone || h.EtherType != EtherTypeARP || h.Src != a.SenderIP || h.Dst != a.TargetIP ||
			h.VLANs != a.VLANs.N {
			t.Fatalf("ParseARP accepts %x (%+v), classifier: %v, %+v", frame, a, r, h)
		}
	case err == ErrTruncated || err == header.ErrTooManyVLANs:
		if r == classify.ReasonNone {
			t.Fatalf("ParseARP refuses %x (%v), classifier accepts it: %+v", frame, err, h)
		}
	}
}
