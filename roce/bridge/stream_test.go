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
	// The bytes went from the receive buffers to the socket without a
	// copy, a batch of them per gathered write, with one hand-off to the
	// writer and one back per batch (the writer counts its own once it
	// has handed the batch back: wait for the last).
	st := n.b.Stats()
	for end := time.Now().Add(5 * time.Second); st.Wakeups["to_tcp"] != 2*st.Syscalls["to_tcp"] && time.Now().Before(end); st = n.b.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st.BytesToTCP != count*size || st.Copied["to_tcp"] != 0 {
		t.Errorf("to_tcp: %d bytes relayed, %d copied; want %d, none copied", st.BytesToTCP, st.Copied["to_tcp"], count*size)
	}
	if w, k := st.Syscalls["to_tcp"], st.Wakeups["to_tcp"]; w == 0 || k != 2*w {
		t.Errorf("to_tcp: %d writes, %d wake-ups; want some writes and two wake-ups each", w, k)
	}
	n.run(10*time.Second, func() bool { c.Poll(time.Now()); return c.Done() && n.b.Conns() == 0 })
	if s := n.b.Pool().Stats().Sessions; s != 0 {
		t.Errorf("%d bridge sessions left behind", s)
	}
}
