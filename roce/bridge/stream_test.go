package bridge

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/ping"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// TestPingStream: roce-ping's stream mode, the daemon's own active side,
// sends a byte stream through the bridge to a TCP sink, which gets every
// byte in order; the run ends with everything acknowledged and freed.
func TestPingStream(t *testing.T) {
	n := newTestNet(t, Config{})
	got := make(chan []byte, 1)
	n.server(func(c net.Conn) {
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	})
	const count, size = 40, 5000 // a message size that is no buffer multiple
	var res *ping.Result
	sc := n.cliCfg
	c, err := ping.Start(n.CliM, ipS, n.tcpPort, ping.Config{
		Count: count, Size: size, Mode: ping.ModeStream, Session: sc, Allocator: n.alloc, Timeout: 20 * time.Second,
	}, time.Now(), func(r ping.Result) { res = &r })
	if err != nil {
		t.Fatal(err)
	}
	n.run(30*time.Second, func() bool { c.Poll(time.Now()); return res != nil })
	if res.Err != nil || res.Bytes != count*size || res.Elapsed <= 0 {
		t.Fatalf("stream: %+v", res)
	}
	var b []byte
	n.run(30*time.Second, roctest.Received(got, &b))
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*31 + 7)
	}
	if len(b) != count*size || !bytes.Equal(b, bytes.Repeat(want, count)) {
		t.Fatalf("the sink got %d bytes, want the %d-byte pattern %d times, in order", len(b), size, count)
	}
	n.run(10*time.Second, func() bool { c.Poll(time.Now()); return c.Done() && n.b.Conns() == 0 })
	if s := n.b.Pool().Stats().Sessions; s != 0 {
		t.Errorf("%d bridge sessions left behind", s)
	}
}
