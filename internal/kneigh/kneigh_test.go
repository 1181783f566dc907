package kneigh

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
)

// next waits up to d for an answer.
func next(r *Resolver, d time.Duration) (netip.Addr, [6]byte, bool) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if ip, mac, ok := r.Next(); ok {
			return ip, mac, true
		}
	}
	return netip.Addr{}, [6]byte{}, false
}

// A peer the kernel has never talked to is resolved by the kernel's own
// ARP, and its MAC address reaches Next; an address nobody holds gets no
// answer, and the resolver goes on.
func TestResolvesThroughKernel(t *testing.T) {
	net := fmt.Sprintf("10.80.%d.", 100+os.Getpid()%100)
	peer := netip.MustParsePrefix(net + "2/24")
	v := testenv.NewVethNS(t, peer)
	if err := v.HostAddr(netip.MustParsePrefix(net + "1/24")); err != nil {
		t.Fatal(err)
	}
	r, err := Start(v.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	nobody := netip.MustParseAddr(net + "3")
	if !r.Request(nobody) || !r.Request(peer.Addr()) {
		t.Fatal("request refused on an empty queue")
	}
	ip, mac, ok := next(r, 3*time.Second)
	if !ok || ip != peer.Addr() || string(mac[:]) != string(v.PeerMAC) {
		t.Fatalf("answer %v %x %v: want %v %v", ip, mac, ok, peer.Addr(), v.PeerMAC)
	}
	if ip, mac, ok := next(r, 2500*time.Millisecond); ok {
		t.Fatalf("answer for %v (%x): nobody holds %v", ip, mac, nobody)
	}
	// Known now: answered again at once.
	r.Request(peer.Addr())
	if ip, _, ok := next(r, time.Second); !ok || ip != peer.Addr() {
		t.Fatalf("second request: %v %v", ip, ok)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("netlink: %v", err)
	}
}

func TestStartUnknownInterface(t *testing.T) {
	if _, err := Start("cdd-none0"); err == nil {
		t.Fatal("Start on a missing interface succeeded")
	}
}
