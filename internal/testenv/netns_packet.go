//go:build linux

package testenv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// PacketSocket is an AF_PACKET socket bound to one interface. It sends and
// receives whole Ethernet frames, 802.1Q tags included.
type PacketSocket struct {
	ifname string
	f      *os.File // non-blocking, on the runtime poller
	rc     syscall.RawConn
}

// Linux constants the syscall package lacks (linux/if_packet.h).
const (
	packetAuxdata        = 8    // PACKET_AUXDATA
	tpStatusVLANValid    = 0x10 // TP_STATUS_VLAN_VALID
	tpStatusVLANTPIDVald = 0x40 // TP_STATUS_VLAN_TPID_VALID
	sizeofAuxdata        = 20   // struct tpacket_auxdata
)

const (
	// recvPoll bounds how long Recv blocks before looking at its context
	// again.
	recvPoll = 50 * time.Millisecond
	// maxFrame is the receive buffer: above any frame on a 1500-byte veth,
	// and above the 64 KiB GSO frames a kernel TCP sender can hand it.
	maxFrame = 1 << 17
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPacketSocket(ifname string, ifindex int) (*PacketSocket, error) {
	// Protocol 0 receives nothing until bind names the interface, so no
	// frame of another interface is queued in between.
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("packet socket for %s: %w", ifname, err)
	}
	setup := func() error {
		// The kernel strips 802.1Q tags on receive and reports them in
		// auxiliary data; Recv puts them back.
		if err := syscall.SetsockoptInt(fd, syscall.SOL_PACKET, packetAuxdata, 1); err != nil {
			return fmt.Errorf("PACKET_AUXDATA: %w", err)
		}
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20); err != nil {
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
		sa := &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifindex}
		if err := syscall.Bind(fd, sa); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		return nil
	}
	if err := setup(); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("packet socket for %s (index %d): %w", ifname, ifindex, err)
	}
	f := os.NewFile(uintptr(fd), "packet:"+ifname)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("packet socket for %s: %w", ifname, err)
	}
	return &PacketSocket{ifname: ifname, f: f, rc: rc}, nil
}

// Send transmits each frame as is. Frames must hold at least an Ethernet
// header and fit the interface MTU (plus 4 bytes if 802.1Q-tagged).
func (s *PacketSocket) Send(frames [][]byte) error {
	for i, fr := range frames {
		var werr error
		err := s.rc.Write(func(fd uintptr) bool {
			_, werr = syscall.Write(int(fd), fr)
			return werr != syscall.EAGAIN
		})
		if err == nil {
			err = werr
		}
		if err != nil {
			return fmt.Errorf("testenv: send frame %d (%d bytes) on %s: %w", i, len(fr), s.ifname, err)
		}
	}
	return nil
}

// Recv returns frames arriving at the interface, oldest first, until it has
// max of them or ctx is done; in the latter case it returns the frames it
// has with ctx.Err(). Frames the interface itself sends are not returned.
func (s *PacketSocket) Recv(ctx context.Context, max int) ([][]byte, error) {
	buf := make([]byte, maxFrame)
	oob := make([]byte, syscall.CmsgSpace(sizeofAuxdata))
	var frames [][]byte
	for len(frames) < max {
		if err := ctx.Err(); err != nil {
			return frames, err
		}
		deadline := time.Now().Add(recvPoll)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := s.f.SetReadDeadline(deadline); err != nil {
			return frames, fmt.Errorf("testenv: recv on %s: %w", s.ifname, err)
		}
		var n, oobn int
		var from syscall.Sockaddr
		var rerr error
		err := s.rc.Read(func(fd uintptr) bool {
			n, oobn, _, from, rerr = syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_TRUNC)
			return rerr != syscall.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return frames, fmt.Errorf("testenv: recv on %s: %w", s.ifname, err)
		case n > len(buf):
			return frames, fmt.Errorf("testenv: recv on %s: %d-byte frame exceeds %d-byte buffer", s.ifname, n, len(buf))
		}
		if sll, ok := from.(*syscall.SockaddrLinklayer); ok && sll.Pkttype == syscall.PACKET_OUTGOING {
			continue
		}
		fr, err := restoreVLAN(buf[:n], oob[:oobn])
		if err != nil {
			return frames, fmt.Errorf("testenv: recv on %s: %w", s.ifname, err)
		}
		frames = append(frames, fr)
	}
	return frames, nil
}

// restoreVLAN returns a copy of frame with the 802.1Q tag that the kernel
// stripped, as reported in PACKET_AUXDATA, put back after the MAC addresses.
func restoreVLAN(frame, oob []byte) ([]byte, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_PACKET || m.Header.Type != packetAuxdata || len(m.Data) < sizeofAuxdata {
			continue
		}
		status := binary.NativeEndian.Uint32(m.Data[0:])
		if status&tpStatusVLANValid == 0 || len(frame) < 12 {
			break
		}
		tpid := binary.NativeEndian.Uint16(m.Data[18:])
		if status&tpStatusVLANTPIDVald == 0 {
			tpid = 0x8100
		}
		out := make([]byte, 0, len(frame)+4)
		out = append(out, frame[:12]...)
		out = binary.BigEndian.AppendUint16(out, tpid)
		out = binary.BigEndian.AppendUint16(out, binary.NativeEndian.Uint16(m.Data[16:]))
		return append(out, frame[12:]...), nil
	}
	return append([]byte(nil), frame...), nil
}

// Close closes the socket; it may be called while Recv is blocked, which
// then returns an error.
func (s *PacketSocket) Close() error { return s.f.Close() }
