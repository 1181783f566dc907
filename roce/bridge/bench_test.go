package bridge

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// BenchmarkBridgeToTCP streams a client's bytes through the bridge to a
// TCP sink on loopback: the client's endpoint, the bridge's endpoint and
// the bridge with its socket writes all run on the benchmark's
// goroutine, as on one poll loop; the sink reads on its own. Moving the
// bytes allocates nothing: chunks are reused, and the writes go out
// from the poll loop without a goroutine hand-off.
func BenchmarkBridgeToTCP(b *testing.B) {
	n := newTestNet(b, Config{})
	n.server(func(c net.Conn) { io.Copy(io.Discard, c); c.Close() })
	c := n.dial(n.tcpPort)
	n.run(5*time.Second, func() bool { return c.connected })
	if c.connErr != nil {
		b.Fatal(c.connErr)
	}
	msg := make([]byte, 64<<10)
	send := func() {
		for sent := 0; sent < len(msg); n.poll() {
			k, err := c.sess.Send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				b.Fatal(err)
			}
			sent += k
		}
	}
	send()
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send()
	}
	b.StopTimer()
	if err := n.b.Shutdown(); err != nil {
		b.Fatal(err)
	}
}
