package wire

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestLayersCaptures(t *testing.T) {
	RegisterLayers()
	RegisterLayers() // idempotent
	cmSeen := map[uint16]int{}
	for _, name := range []string{captureRping, captureCMReq} {
		for _, f := range readCapture(t, name) {
			pkt := gopacket.NewPacket(f.data, layers.LayerTypeEthernet, gopacket.Default)
			if el := pkt.ErrorLayer(); el != nil {
				t.Errorf("%s frame %d: %v", name, f.number, el.Error())
				continue
			}
			bl, _ := pkt.Layer(LayerTypeBTH).(*BTHLayer)
			if !isRoCE(f.data) {
				if bl != nil {
					t.Errorf("%s frame %d: BTH in a non-RoCE frame", name, f.number)
				}
				continue
			}
			var p Packet
			if err := ParsePacket(f.data, &p); err != nil {
				t.Fatal(err)
			}
			if bl == nil {
				t.Errorf("%s frame %d: no BTH layer: %v", name, f.number, pkt)
				continue
			}
			if bl.BTH != p.BTH || bl.ICRC != p.ICRC {
				t.Errorf("%s frame %d: layer %+v, ParsePacket %+v", name, f.number, bl.BTH, p.BTH)
			}
			// The layer chain follows the opcode's header order and ends
			// in the payload.
			var chain []gopacket.LayerType
			for _, l := range pkt.Layers()[3:] {
				chain = append(chain, l.LayerType())
			}
			want := append([]gopacket.LayerType{LayerTypeBTH}, extLayers(p.BTH.Opcode)...)
			switch {
			case p.BTH.DestQP == 1:
				want = append(want, LayerTypeMAD, LayerTypeCM)
			case len(p.Payload) > 0:
				want = append(want, gopacket.LayerTypePayload)
			}
			if len(chain) != len(want) {
				t.Errorf("%s frame %d: layers %v, want %v", name, f.number, chain, want)
				continue
			}
			for i := range chain {
				if chain[i] != want[i] {
					t.Errorf("%s frame %d: layers %v, want %v", name, f.number, chain, want)
					break
				}
			}
			for _, l := range pkt.Layers()[4:] {
				if e, ok := l.(*ExtLayer); ok {
					switch e.Type {
					case LayerTypeRETH:
						if e.RETH != p.RETH {
							t.Errorf("frame %d: reth %+v", f.number, e.RETH)
						}
					case LayerTypeAETH:
						if e.AETH != p.AETH {
							t.Errorf("frame %d: aeth %+v", f.number, e.AETH)
						}
					case LayerTypeDETH:
						if e.DETH != p.DETH {
							t.Errorf("frame %d: deth %+v", f.number, e.DETH)
						}
					}
				}
			}
			if app := pkt.Layer(gopacket.LayerTypePayload); app != nil && !bytes.Equal(app.LayerContents(), p.Payload) {
				t.Errorf("frame %d: payload layer differs from ParsePacket", f.number)
			}
			if cm, ok := pkt.Layer(LayerTypeCM).(*CMLayer); ok {
				if cm.Msg == nil {
					t.Errorf("frame %d: CM message not decoded", f.number)
					continue
				}
				cmSeen[cm.Msg.AttrID()]++
			}
		}
	}
	want := map[uint16]int{AttrReq: 17, AttrRep: 1, AttrRTU: 1, AttrDREQ: 1, AttrDREP: 1}
	for a, n := range want {
		if cmSeen[a] != n {
			t.Errorf("attribute %#x: %d CM layers, want %d", a, cmSeen[a], n)
		}
	}
}

func TestLayersMalformed(t *testing.T) {
	RegisterLayers()
	good := rcFrame(t, OpRCWriteOnly, []byte("x"))
	tests := []struct {
		name string
		f    []byte
	}{
		{"short bth", func() []byte {
			f := append([]byte(nil), good[:42+10]...)
			f[17] = 38 // ip total length
			f[39] = 18 // udp length
			return f
		}()},
		{"tver", func() []byte { f := append([]byte(nil), good...); f[43] |= 2; return f }()},
		{"unknown opcode", func() []byte { f := append([]byte(nil), good...); f[42] = 0x1F; return f }()},
		{"short reth", func() []byte {
			f := append([]byte(nil), good[:42+12+8+4]...)
			f[17] = 20 + 8 + 12 + 8 + 4
			f[39] = 8 + 12 + 8 + 4
			return f
		}()},
	}
	for _, tt := range tests {
		pkt := gopacket.NewPacket(tt.f, layers.LayerTypeEthernet, gopacket.Default)
		if pkt.ErrorLayer() == nil {
			t.Errorf("%s: no decode failure: %v", tt.name, pkt)
		}
	}
}
