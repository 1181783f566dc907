package pcapcheck

import (
	"bytes"
	"testing"

	"github.com/google/gopacket/layers"
)

// FuzzFrames feeds a sequence of frames (each prefixed by a one-byte
// length, times 4) to the checker: it must not panic, and its report
// must print.
func FuzzFrames(f *testing.F) {
	fs := frames(f, captureRping)
	var seed []byte
	for _, fr := range fs[:12] {
		if len(fr) <= 255*4 && len(fr)%4 == 2 {
			seed = append(seed, byte(len(fr)/4))
			seed = append(seed, fr[:len(fr)/4*4]...)
		}
	}
	f.Add(seed)
	var whole []byte
	for _, fr := range fs[:6] {
		whole = append(whole, byte((len(fr)+3)/4))
		whole = append(whole, fr...)
		whole = append(whole, make([]byte, (len(fr)+3)/4*4-len(fr))...)
	}
	f.Add(whole)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newChecker()
		var scratch []byte
		for n := 1; len(data) > 0; n++ {
			size := min(int(data[0])*4, len(data)-1)
			frame := data[1 : 1+size : 1+size]
			data = data[1+size:]
			c.rep.Frames++
			for _, lt := range []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL} {
				if fr, ok := toEthernet(lt, frame, scratch); ok {
					c.frame(n, fr, false)
				}
			}
		}
		var b bytes.Buffer
		if _, err := c.rep.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
	})
}
