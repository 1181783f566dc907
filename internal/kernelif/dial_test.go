package kernelif_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
)

// TestDialerInNamespace: a dialer for a namespace reaches a listener in
// it, and not one on the same address in the caller's namespace.
func TestDialerInNamespace(t *testing.T) {
	ns := testenv.NewNetNS(t)
	outside, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	port := outside.Addr().(*net.TCPAddr).Port
	d, err := kernelif.NewDialer(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	if c, err := d.Dial(ctx, addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %v from the namespace: %v; want connection refused (the listener is outside)", addr, err)
	}
	var inside net.Listener
	if err := ns.Do(func() (err error) { inside, err = net.Listen("tcp", addr.String()); return }); err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	c, err := d.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("dial %v in the namespace: %v", addr, err)
	}
	c.Close()
	d.Close()
	if _, err := d.Dial(ctx, addr); !errors.Is(err, kernelif.ErrDialerClosed) {
		t.Errorf("dial after close: %v", err)
	}
}
