package cephrdma

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// maxDuplicateHellos bounds the repeated first records a server skips
// while it waits for the client's acknowledgement (Ceph ignores them).
const maxDuplicateHellos = 2

// gidOf returns the GID Ceph puts in its record for addr: the IPv6
// address, or the IPv4-mapped one.
func gidOf(addr netip.Addr) [16]byte { return addr.As16() }

// checkGID verifies that gid names peer.
func checkGID(gid [16]byte, peer netip.Addr) error {
	a := netip.AddrFrom16(gid).Unmap()
	if a != peer.Unmap() {
		return fmt.Errorf("%w: gid %v, tcp peer %v (set ms_async_rdma_gid_idx to the peer's IPv4-mapped GID)",
			ErrGIDMismatch, a, peer.Unmap())
	}
	return nil
}

// checkQP verifies the QPN and PSN fields of r.
func checkQP(r *wire.CephQPRecord) error {
	switch {
	case r.QPN < 2 || r.QPN > wire.PSNMask:
		return fmt.Errorf("%w: qpn %#x", ErrBadRecord, r.QPN)
	case r.PSN > wire.PSNMask:
		return fmt.Errorf("%w: psn %#x wider than 24 bits", ErrBadRecord, r.PSN)
	}
	return nil
}

// checkHello verifies a client's first record, received from peer.
func checkHello(r *wire.CephQPRecord, peer netip.Addr) error {
	if r.PeerQPN != 0 {
		return fmt.Errorf("%w: first record names peer qpn %#x", ErrBadRecord, r.PeerQPN)
	}
	if err := checkQP(r); err != nil {
		return err
	}
	return checkGID(r.GID, peer)
}

// checkReply verifies a server's record, received from peer by the
// client whose QP is ours. Ceph's server leaves peer_qpn 0.
func checkReply(r *wire.CephQPRecord, ours uint32, peer netip.Addr) error {
	if r.PeerQPN != 0 && r.PeerQPN != ours {
		return fmt.Errorf("%w: reply names peer qpn %#x, ours is %#x", ErrBadRecord, r.PeerQPN, ours)
	}
	if err := checkQP(r); err != nil {
		return err
	}
	return checkGID(r.GID, peer)
}

// checkAck verifies the client's acknowledgement against its first
// record, for the server whose QP is ours. It reports dup for a repeat of
// the first record, which the server skips as Ceph does.
func checkAck(r, hello *wire.CephQPRecord, ours uint32) (dup bool, err error) {
	if r.PeerQPN == 0 && *r == *hello {
		return true, nil
	}
	switch {
	case r.PeerQPN != ours:
		return false, fmt.Errorf("%w: acknowledgement names peer qpn %#x, ours is %#x", ErrBadRecord, r.PeerQPN, ours)
	case r.QPN != hello.QPN || r.GID != hello.GID:
		return false, fmt.Errorf("%w: acknowledgement for qpn %#x gid %x, first record had qpn %#x gid %x",
			ErrBadRecord, r.QPN, r.GID, hello.QPN, hello.GID)
	}
	return false, nil
}

// readRecord reads and decodes one record from c within timeout.
func readRecord(c net.Conn, buf *[wire.CephQPRecordLen]byte, timeout time.Duration) (wire.CephQPRecord, error) {
	var r wire.CephQPRecord
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return r, err
	}
	n, err := io.ReadFull(c, buf[:])
	switch {
	case err == io.EOF:
		return r, fmt.Errorf("%w: connection closed before a record", ErrBadRecord)
	case err == io.ErrUnexpectedEOF:
		return r, fmt.Errorf("%w: connection closed after %d of %d bytes", ErrBadRecord, n, wire.CephQPRecordLen)
	case err != nil:
		return r, fmt.Errorf("after %d of %d bytes: %w", n, wire.CephQPRecordLen, err)
	}
	if err := r.Decode(buf[:]); err != nil {
		return r, fmt.Errorf("%w: %q: %w", ErrBadRecord, buf[:], err)
	}
	return r, nil
}

// writeRecord encodes r and writes it to c in one write within timeout:
// Ceph's receiver takes exactly one record per read.
func writeRecord(c net.Conn, r *wire.CephQPRecord, timeout time.Duration) error {
	var buf [wire.CephQPRecordLen]byte
	if err := r.Encode(buf[:]); err != nil {
		return err
	}
	if err := c.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := c.Write(buf[:])
	return err
}

// peerAddr returns the address at the other end of c.
func peerAddr(c net.Conn) (netip.AddrPort, error) {
	a := c.RemoteAddr()
	var ap netip.AddrPort
	if t, ok := a.(*net.TCPAddr); ok {
		ap = t.AddrPort()
	} else {
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return ap, fmt.Errorf("cephrdma: peer address %q: %w", a, err)
		}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}
