package app_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

func FuzzRPingInfo(f *testing.F) {
	f.Add([]byte{0, 0, 0x7f, 0xff, 0x12, 0x34, 0x56, 0x78, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 64})
	f.Add(make([]byte, 15))
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, p []byte) {
		var i app.RPingInfo
		if err := i.Decode(p); err != nil {
			if len(p) == app.RPingInfoLen {
				t.Fatalf("rejected %d bytes: %v", len(p), err)
			}
			return
		}
		out := make([]byte, app.RPingInfoLen)
		if err := i.Encode(out); err != nil || !bytes.Equal(out, p) {
			t.Fatalf("round trip %x → %+v → %x (%v)", p, i, out, err)
		}
	})
}

// FuzzRPingServer sends an rping server whatever messages the input
// describes: each is a length byte and that many bytes, where a 16-byte
// message whose size field is small advertises the client's own buffer.
// Whatever arrives, the server must not panic, must either keep going or
// report the connection done with an error, and must release everything
// on Close.
func FuzzRPingServer(f *testing.F) {
	info := func(off uint64, rkeyOK bool, size uint32) []byte {
		b := make([]byte, 17)
		b[0] = 16
		binary.BigEndian.PutUint64(b[1:], off)
		if rkeyOK {
			b[9] = 0xFF // replaced by the region's R_Key
		}
		binary.BigEndian.PutUint32(b[13:], size)
		return b
	}
	f.Add(append(info(0, true, 64), info(64, true, 64)...))
	f.Add(append(info(0, true, 100), info(0, false, 64)...))
	f.Add([]byte{3, 1, 2, 3})
	f.Add([]byte{0})
	f.Add(append(info(0, true, 1<<20), 5, 1, 2, 3, 4, 5))
	f.Fuzz(func(t *testing.T, in []byte) {
		n := newTestNet(t, memlink.Config{})
		alloc := &roce.HeapAllocator{}
		srv, err := app.NewRPingServer(n.Srv, app.RPingConfig{MaxSize: 4096, Allocator: alloc, StallTimeout: 1e9})
		sqp, d := n.serveAccept(srv, err)
		p := n.newPeer(64, 4, 8192)
		for i := range 4 {
			p.postRecv(t, uint64(i), 4096+i*16, 16)
		}
		n.connect(sqp, p.qp, defaultCM())
		srv.Established(sqp)
		mem := p.mr.Bytes()
		off := 0
		for k := 0; len(in) > 0 && k < 32 && p.qp.SendQueueFree() > 0; k++ {
			l := min(int(in[0])%40, len(in)-1, 256)
			msg := mem[off : off+l]
			copy(msg, in[1:1+l])
			if l == 16 && msg[8] == 0xFF {
				binary.BigEndian.PutUint64(msg, p.mr.Addr()+binary.BigEndian.Uint64(msg)%8192)
				binary.BigEndian.PutUint32(msg[8:], p.mr.RKey())
			}
			in = in[1+l:]
			wr := roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(off, l)}}
			if l == 0 {
				wr.SGList = nil
			}
			if err := p.qp.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			off += l
		}
		for i := 0; i < 200_000; i++ {
			if d.calls > 0 || n.Poll() == 0 && !n.Advance() {
				break
			}
			n.Now = n.Now.Add(1000)
			for p.rcq.Len() > 0 { // go-aheads: keep receives posted
				wc := roctest.PollOne(t, p.rcq)
				if wc.Status == roce.WCSuccess {
					p.postRecv(t, wc.WRID, 4096+int(wc.WRID%4)*16, 16)
				}
			}
			p.scq.Poll(make([]roce.WorkCompletion, 64))
		}
		if d.calls > 1 || d.calls == 1 && d.err == nil {
			t.Fatalf("done %d times with %v", d.calls, d.err)
		}
		if err := srv.Close(sqp); err != nil {
			t.Fatal(err)
		}
		p.destroy(t)
		if err := srv.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if alloc.InUse() != 0 {
			t.Fatalf("%d bytes leaked", alloc.InUse())
		}
	})
}
