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
	// AFPacketDefaultBlockSize is its blocksz when left out
	// (DFLT_BLOCK_SIZE).
	AFPacketDefaultBlockSize = 4096
	// afPacketBlockAlign: the kernel takes a ring block of whole pages
	// (4 KiB here; more where pages are larger) and frames aligned to
	// TPACKET_ALIGNMENT (16).
	afPacketBlockAlign = 4096
	afPacketFrameAlign = 16
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

// afPacketFrames checks a net_af_packet port's ring frames (framesz,
// blocksz) against the port MTU and the mbuf data room: the kernel cuts a
// frame that does not fit a ring frame (TCP then stalls on every
// full-sized segment); DPDK 22.11 finds frame i at i × framesz, so a
// block that does not hold whole frames back to back loses frames; and
// DPDK refuses to set up the RX queue when a ring frame's data would not
// fit an mbuf. The latter is left to the data room's own check when that
// fails (roomOK false): one error for one cause. At MTU 9000 neither default fits: framesz=9216 and
// mempool.data_room: 9344 do.
func (v *validation) afPacketFrames(roomOK bool) {
	p, room := v.c.Port, v.c.Mempool.DataRoom
	dev, err := devargs.Parse(p.Device)
	if err != nil || dev.PCI || !strings.HasPrefix(dev.Name, "net_af_packet") {
		return
	}
	size, ok := v.afPacketArg(&dev, "framesz", AFPacketDefaultFrameSize)
	block, ok2 := v.afPacketArg(&dev, "blocksz", AFPacketDefaultBlockSize)
	if !ok || !ok2 {
		return
	}
	frame := p.MTU + 14 // the Ethernet header; the ring holds no CRC
	switch {
	case size%afPacketFrameAlign != 0 || block%size != 0 || block%afPacketBlockAlign != 0:
		v.bad("port.device", "net_af_packet blocksz=%d, framesz=%d: framesz must be a multiple of %d, and blocksz a multiple of framesz (DPDK finds frame i at i × framesz) and of the %d-byte page",
			block, size, afPacketFrameAlign, afPacketBlockAlign)
	case size-afPacketRxOffset < frame:
		v.bad("port.device", "net_af_packet framesz=%d holds %d bytes of a received frame (the kernel puts it %d bytes in), less than MTU %d plus its 14-byte Ethernet header: the kernel would cut full-sized frames; set framesz to at least %d (a multiple of 16) and blocksz to a common multiple of it and the page size",
			size, size-afPacketRxOffset, afPacketRxOffset, p.MTU, align16(frame+afPacketRxOffset))
	case roomOK && size-afPacketFrameHeader > room-128:
		v.bad("port.device", "net_af_packet framesz=%d carries up to %d bytes, more than an mbuf's %d (mempool.data_room %d less the 128-byte headroom): DPDK refuses the RX queue; raise mempool.data_room to %d or lower framesz",
			size, size-afPacketFrameHeader, room-128, room, size-afPacketFrameHeader+128)
	}
}

// afPacketArg returns the device's positive integer argument key, or def
// when it has none; false after reporting a bad one.
func (v *validation) afPacketArg(dev *devargs.Device, key string, def int) (int, bool) {
	vals := dev.Values(key)
	if len(vals) == 0 {
		return def, true
	}
	n, err := strconv.Atoi(vals[len(vals)-1])
	if err != nil || n <= 0 {
		v.bad("port.device", "%s=%s: want a positive number of bytes", key, vals[len(vals)-1])
		return 0, false
	}
	return n, true
}

func align16(n int) int { return (n + afPacketFrameAlign - 1) &^ (afPacketFrameAlign - 1) }
