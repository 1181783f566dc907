package config

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// errNotCapture is returned for a file that is neither pcap nor pcapng.
var errNotCapture = errors.New("not a pcap or pcapng capture")

// captureHasFrames reports whether the pcap or pcapng file at path holds
// at least one frame, reading only as far as the first one.
func captureHasFrames(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	magic, err := r.Peek(4)
	if err != nil {
		return false, errNotCapture
	}
	switch binary.LittleEndian.Uint32(magic) {
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1: // pcap, µs or ns, either byte order
		// A 24-byte file header, then 16-byte record headers.
		if _, err := r.Discard(24); err != nil {
			return false, errNotCapture
		}
		_, err := r.Discard(16)
		return err == nil, nil
	case 0x0a0d0d0a: // pcapng section header block
		return pcapngHasFrames(r)
	}
	return false, errNotCapture
}

// pcapngHasFrames walks pcapng blocks up to the first packet block.
func pcapngHasFrames(r *bufio.Reader) (bool, error) {
	var order binary.ByteOrder = binary.LittleEndian
	for {
		var hdr [12]byte // type, total length, and the first body word
		if _, err := io.ReadFull(r, hdr[:8]); err == io.EOF {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("%w: truncated block", errNotCapture)
		}
		typ := order.Uint32(hdr[:4])
		if typ == 0x0a0d0d0a {
			// A section header: its byte-order magic sets the order of
			// this section, the length included.
			if _, err := io.ReadFull(r, hdr[8:12]); err != nil {
				return false, fmt.Errorf("%w: truncated section header", errNotCapture)
			}
			switch {
			case binary.LittleEndian.Uint32(hdr[8:]) == 0x1a2b3c4d:
				order = binary.LittleEndian
			case binary.BigEndian.Uint32(hdr[8:]) == 0x1a2b3c4d:
				order = binary.BigEndian
			default:
				return false, fmt.Errorf("%w: bad byte-order magic", errNotCapture)
			}
		}
		switch typ {
		case 2, 3, 6: // packet (obsolete), simple packet, enhanced packet
			return true, nil
		}
		n := int(order.Uint32(hdr[4:8]))
		if n < 12 || n%4 != 0 {
			return false, fmt.Errorf("%w: bad block length %d", errNotCapture, n)
		}
		skip := n - 8
		if typ == 0x0a0d0d0a {
			skip -= 4
		}
		if _, err := r.Discard(skip); err != nil {
			return false, fmt.Errorf("%w: truncated block", errNotCapture)
		}
	}
}
