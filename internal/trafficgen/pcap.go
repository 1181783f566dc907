package trafficgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The classic libpcap file format is written and read here directly:
// gopacket/pcapgo would pull in golang.org/x/net, and the format is two
// fixed-size little headers.

// PcapInterval is the spacing of the timestamps WritePcap assigns: frame i
// is stamped PcapEpoch() + i*PcapInterval, so a file's bytes depend only on
// its frames.
const PcapInterval = 20 * time.Microsecond

// PcapEpoch is the timestamp of the first frame written by WritePcap.
func PcapEpoch() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }

const (
	pcapMagicMicro   = 0xa1b2c3d4
	pcapMagicNano    = 0xa1b23c4d
	pcapFileHdrLen   = 24
	pcapRecordHdrLen = 16
	// pcapSnaplen is the snapshot length written in the file header;
	// every generated frame is shorter, so none is truncated.
	pcapSnaplen = 65535
	// linkTypeEthernet is LINKTYPE_ETHERNET.
	linkTypeEthernet = 1
	// pcapMaxRecord bounds the captured length ReadPcap accepts, so a
	// corrupt header cannot make it allocate gigabytes.
	pcapMaxRecord = 256 << 10
)

// WritePcap writes frames to w as a classic little-endian pcap file with
// microsecond timestamps and LINKTYPE_ETHERNET, the format DPDK's net_pcap
// driver replays.
func WritePcap(w io.Writer, frames []Frame) error {
	var hdr [pcapFileHdrLen]byte
	le := binary.LittleEndian
	le.PutUint32(hdr[0:], pcapMagicMicro)
	le.PutUint16(hdr[4:], 2) // version 2.4
	le.PutUint16(hdr[6:], 4)
	// hdr[8:16]: thiszone and sigfigs, both zero.
	le.PutUint32(hdr[16:], pcapSnaplen)
	le.PutUint32(hdr[20:], linkTypeEthernet)
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("trafficgen: write pcap header: %w", err)
	}
	ts := PcapEpoch()
	var rec [pcapRecordHdrLen]byte
	for i, f := range frames {
		if len(f.Data) > pcapSnaplen {
			return fmt.Errorf("trafficgen: frame %d: %d bytes exceeds pcap snaplen %d", i, len(f.Data), pcapSnaplen)
		}
		le.PutUint32(rec[0:], uint32(ts.Unix()))
		le.PutUint32(rec[4:], uint32(ts.Nanosecond()/1000))
		le.PutUint32(rec[8:], uint32(len(f.Data)))
		le.PutUint32(rec[12:], uint32(len(f.Data)))
		if _, err := w.Write(rec[:]); err != nil {
			return fmt.Errorf("trafficgen: write pcap frame %d: %w", i, err)
		}
		if _, err := w.Write(f.Data); err != nil {
			return fmt.Errorf("trafficgen: write pcap frame %d: %w", i, err)
		}
		ts = ts.Add(PcapInterval)
	}
	return nil
}

// ErrBadPcap is returned, wrapped with the reason, by ReadPcap for input that
// is not a classic pcap file of Ethernet frames.
var ErrBadPcap = errors.New("trafficgen: bad pcap")

// ReadPcap reads every frame of a classic pcap file (either byte order,
// microsecond or nanosecond timestamps) whose link type is Ethernet.
// Timestamps are discarded. Records cut short by the snapshot length are
// returned as captured.
func ReadPcap(r io.Reader) ([][]byte, error) {
	var hdr [pcapFileHdrLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: file header: %w", ErrBadPcap, err)
	}
	var bo binary.ByteOrder
	switch {
	case isMagic(binary.LittleEndian.Uint32(hdr[:])):
		bo = binary.LittleEndian
	case isMagic(binary.BigEndian.Uint32(hdr[:])):
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: magic %#08x", ErrBadPcap, binary.LittleEndian.Uint32(hdr[:]))
	}
	if lt := bo.Uint32(hdr[20:]) & 0xffff; lt != linkTypeEthernet {
		return nil, fmt.Errorf("%w: link type %d, want Ethernet", ErrBadPcap, lt)
	}
	var frames [][]byte
	var rec [pcapRecordHdrLen]byte
	for i := 0; ; i++ {
		switch _, err := io.ReadFull(r, rec[:]); {
		case errors.Is(err, io.EOF):
			return frames, nil
		case err != nil:
			return frames, fmt.Errorf("%w: record %d header: %w", ErrBadPcap, i, err)
		}
		caplen := bo.Uint32(rec[8:])
		if caplen > pcapMaxRecord {
			return frames, fmt.Errorf("%w: record %d: captured length %d", ErrBadPcap, i, caplen)
		}
		data := make([]byte, caplen)
		if _, err := io.ReadFull(r, data); err != nil {
			return frames, fmt.Errorf("%w: record %d data: %w", ErrBadPcap, i, err)
		}
		frames = append(frames, data)
	}
}

func isMagic(m uint32) bool { return m == pcapMagicMicro || m == pcapMagicNano }
