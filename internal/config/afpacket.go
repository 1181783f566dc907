package config

import (
	"strconv"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
)

// DPDK 22.11's net_af_packet and the kernel's PACKET_MMAP (TPACKET_V2)
// ring frames, which bound the frames a net_af_packet port carries.
const (
	// AFPacketDefaultFrameSize is net_af_packet's framesz when the
	// device string leaves it out (DFLT_FRAME_SIZE).
	AFPacketDefaultFrameSize = 2048
	// afPacketRxOffset is where the kernel puts a received frame's
	// Ethernet header in a ring frame (tpacket_rcv's macoff for
	// TPACKET_V2: TPACKET_ALIGN(TPACKET2_HDRLEN 52 + 16) less the
	// 14-byte header). A frame longer than framesz less this is cut.
	afPacketRxOffset = 80 - 14
	// afPacketFrameHeader is what net_af_packet takes off framesz for a
	// frame's data (TPACKET2_HDRLEN less sizeof(struct sockaddr_ll)):
	// its RX queue setup refuses a pool whose mbufs cannot hold that.
	afPacketFrameHeader = 32
)

// afPacketFrames checks a net_af_packet port's framesz against the port
// MTU and the mbuf data room: the kernel cuts a frame that does not fit
// a ring frame (TCP then stalls on every full-sized segment), and DPDK
// refuses to set up the RX queue when a ring frame's data would not fit
// an mbuf. The latter is left to the data room's own check when that
// fails (roomOK false): one error for one cause. At MTU 9000 neither default fits: framesz=9216 and
// mempool.data_room: 9344 do.
func (v *validation) afPacketFrames(roomOK bool) {
	p, room := v.c.Port, v.c.Mempool.DataRoom
	dev, err := devargs.Parse(p.Device)
	if err != nil || dev.PCI || !strings.HasPrefix(dev.Name, "net_af_packet") {
		return
	}
	size := AFPacketDefaultFrameSize
	if s := dev.Values("framesz"); len(s) > 0 {
		n, err := strconv.Atoi(s[len(s)-1])
		if err != nil || n <= 0 {
			v.bad("port.device", "framesz=%s: want a positive number of bytes", s[len(s)-1])
			return
		}
		size = n
	}
	frame := p.MTU + 14 // the Ethernet header; the ring holds no CRC
	switch {
	case size-afPacketRxOffset < frame:
		v.bad("port.device", "net_af_packet framesz=%d holds %d bytes of a received frame (the kernel puts it %d bytes in), less than MTU %d plus its 14-byte Ethernet header: the kernel would cut full-sized frames; set framesz to at least %d (a multiple of 16) and blocksz to a multiple of the page size that holds it",
			size, size-afPacketRxOffset, afPacketRxOffset, p.MTU, align16(frame+afPacketRxOffset))
	case roomOK && size-afPacketFrameHeader > room-128:
		v.bad("port.device", "net_af_packet framesz=%d carries up to %d bytes, more than an mbuf's %d (mempool.data_room %d less the 128-byte headroom): DPDK refuses the RX queue; raise mempool.data_room to %d or lower framesz",
			size, size-afPacketFrameHeader, room-128, room, size-afPacketFrameHeader+128)
	}
}

func align16(n int) int { return (n + 15) &^ 15 }
