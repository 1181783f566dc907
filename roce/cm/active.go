package cm

import (
	"fmt"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Ephemeral source ports put in the rdma_cm header, Linux's default
// ip_local_port_range. The passive side only reports the port.
const (
	ephemeralLow  = 32768
	ephemeralHigh = 60999
)

// Dial connects qp, in INIT on the Manager's endpoint, to the rdma_cm
// listener at raddr:port (service ID RDMA_PS_TCP<<16|port). It resolves
// raddr's MAC address, sends the REQ with privateData (up to
// MaxReqPrivateData bytes) after the rdma_cm header, and retransmits it
// every Config.RetransmitTimeout up to Config.MaxRetries times. The
// outcome arrives through ev.Connected, from a later Poll. Dial uses the
// time of the latest Poll.
func (m *Manager) Dial(raddr netip.Addr, port uint16, qp *roce.QP, privateData []byte, ev Events) (*Conn, error) {
	raddr = raddr.Unmap()
	switch {
	case !raddr.Is4() || raddr == m.ip || raddr.IsUnspecified() || raddr.IsMulticast():
		return nil, fmt.Errorf("cm: dial %v: %w", raddr, ErrInvalidArgument)
	case port == 0:
		return nil, fmt.Errorf("cm: dial %v port 0: %w", raddr, ErrInvalidArgument)
	case len(privateData) > MaxReqPrivateData:
		return nil, fmt.Errorf("cm: dial %v: %d bytes of private data, max %d: %w", raddr, len(privateData), MaxReqPrivateData, ErrInvalidArgument)
	case !m.roomForConn():
		return nil, fmt.Errorf("cm: dial %v: %d connections: %w", raddr, len(m.conns), ErrTooManyConns)
	}
	c := m.newConn(false)
	if err := m.adoptQP(c, qp); err != nil {
		m.free(c)
		return nil, err
	}
	c.ev = ev
	c.localAddr = netip.AddrPortFrom(m.ip, uint16(ephemeralLow+m.rng.IntN(ephemeralHigh-ephemeralLow+1)))
	c.remoteAddr = netip.AddrPortFrom(raddr, port)
	c.tos, c.ttl = m.cfg.TrafficClass, m.cfg.HopLimit
	c.recvPSN = m.randPSN()
	c.pathMTU = m.cfg.PathMTU
	c.timeout = m.cfg.Timeout
	c.retryCnt = min(m.cfg.RetryCount, m.cfg.MaxRetryCount)
	c.maxRetries = m.cfg.MaxRetries
	m.encodeReq(c, privateData)
	c.state = StateResolving
	err := m.nt.Resolve(raddr, m.now, func(mac [6]byte, err error) { m.resolved(c, mac, err) })
	if err != nil {
		c.owned = false
		m.free(c)
		return nil, fmt.Errorf("cm: dial %v: %w", raddr, err)
	}
	return c, nil
}

// encodeReq writes c's REQ into c.mad, as Linux cm_format_req fills it
// for rdma_cm over RoCE.
func (m *Manager) encodeReq(c *Conn, privateData []byte) {
	mtuEnum, _ := wire.MTUEnum(c.pathMTU)
	req := &m.req
	*req = wire.CMReq{
		LocalCommID: c.localID, ServiceID: wire.ServiceID(wire.PSTCP, c.remoteAddr.Port()),
		LocalCAGUID: m.guid, LocalQPN: c.qpn,
		ResponderResources: uint8(m.cfg.ResponderResources), InitiatorDepth: uint8(m.cfg.InitiatorDepth),
		RemoteCMRespTimeout: m.cfg.CMResponseTimeout, TransportType: wire.CMTransportRC,
		StartingPSN: c.recvPSN, LocalCMRespTimeout: m.cfg.CMResponseTimeout, RetryCount: m.cfg.RetryCount,
		PKey: wire.DefaultPKey, PathMTU: mtuEnum, RNRRetry: m.cfg.RNRRetry,
		MaxCMRetries: uint8(min(m.cfg.MaxRetries, 15)),
		// RoCE has no LIDs: Linux puts the permissive LID when the hop
		// limit exceeds 1.
		PrimaryLocalLID: 0xFFFF, PrimaryRemoteLID: 0xFFFF,
		PrimaryLocalGID: m.ip.As16(), PrimaryRemoteGID: c.remoteAddr.Addr().As16(),
		TrafficClass: m.cfg.TrafficClass, HopLimit: m.cfg.HopLimit, SubnetLocal: m.cfg.HopLimit <= 1,
		LocalACKTimeout: m.cfg.Timeout,
	}
	// As16 of an IPv4 address is its IPv4-mapped form: the RoCEv2 GID.
	cma := wire.CMAHeader{
		Version: wire.CMAVersion, IPVersion: 4, SrcPort: c.localAddr.Port(),
		SrcAddr: m.ip, DstAddr: c.remoteAddr.Addr(),
	}
	cma.Encode(req.PrivateData[:])
	copy(req.PrivateData[wire.CMAHeaderLen:], privateData)
	wire.EncodeCM(c.mad[:], c.tid, req)
}

// resolved continues a Dial once the peer's MAC address is known.
func (m *Manager) resolved(c *Conn, mac [6]byte, err error) {
	if c.state != StateResolving {
		return // canceled meanwhile
	}
	if err != nil {
		m.fail(c, fmt.Errorf("cm: %v: %w", c, err))
		return
	}
	c.remoteMAC = mac
	c.state = StateReqSent
	c.retries = 0
	m.sendMAD(c, c.mad[:])
	m.setDeadline(c, m.now.Add(m.cfg.RetransmitTimeout))
}

// onRep handles a REP to our REQ: RTR, RTS, RTU, established (Linux
// cm_rep_handler and cma_rep_recv). A duplicate REP, whose RTU was lost,
// gets the RTU again.
func (m *Manager) onRep(in *madIn) {
	rep := &m.rep
	if !m.decoded(in, rep) {
		return
	}
	c := m.connFrom(in, rep.RemoteCommID)
	if c == nil || c.passive {
		m.cnt.drop(DropUnmatched)
		return
	}
	switch c.state {
	case StateReqSent:
	case StateEstablished:
		if rep.LocalCommID == c.remoteID {
			m.sendRtu(c)
		}
		return
	default:
		m.cnt.drop(DropUnmatched)
		return
	}
	c.remoteID = rep.LocalCommID
	c.remoteQPN = rep.LocalQPN
	c.remoteGUID = rep.LocalCAGUID
	m.byRemote[remoteKey{in.srcIP, c.remoteID}] = c
	c.privLen = copy(c.priv[:], rep.PrivateData[:])
	// The REP's PSN is what the peer expects first: our send PSN. Depths
	// swap: we issue at most the READs the peer serves, and serve what we
	// offered in the REQ.
	c.sendPSN = rep.StartingPSN
	c.rdAtomic = min(int(rep.ResponderResources), m.cfg.InitiatorDepth)
	c.destRdAtomic = m.cfg.ResponderResources
	c.rnrRetry = rep.RNRRetry
	if rep.LocalQPN < 2 {
		m.sendRej(c, RejConsumerDefined, wire.CMMsgRep, nil, nil)
		m.fail(c, fmt.Errorf("cm: %v: rep names qp %d: %w", c, rep.LocalQPN, ErrInvalidArgument))
		return
	}
	rtr := roce.QPAttr{
		State: roce.QPStateRTR,
		AV: roce.AddressVector{
			DstMAC: c.remoteMAC, DstIP: c.remoteAddr.Addr(), SrcIP: m.ip, TOS: c.tos, TTL: c.ttl,
		},
		PathMTU: c.pathMTU, DestQPN: c.remoteQPN, RQPSN: c.recvPSN,
		MaxDestRdAtomic: c.destRdAtomic, MinRNRTimer: m.cfg.MinRNRTimer,
	}
	rts := roce.QPAttr{
		State: roce.QPStateRTS, SQPSN: c.sendPSN, Timeout: c.timeout,
		RetryCnt: c.retryCnt, RNRRetry: c.rnrRetry, MaxRdAtomic: c.rdAtomic,
	}
	err := c.qp.Modify(&rtr, roce.QPAttrState|roce.QPAttrAV|roce.QPAttrPathMTU|roce.QPAttrDestQPN|
		roce.QPAttrRQPSN|roce.QPAttrMaxDestRdAtomic|roce.QPAttrMinRNRTimer)
	if err == nil {
		err = c.qp.Modify(&rts, roce.QPAttrState|roce.QPAttrSQPSN|roce.QPAttrTimeout|
			roce.QPAttrRetryCnt|roce.QPAttrRNRRetry|roce.QPAttrMaxRdAtomic)
	}
	if err != nil {
		// What cma_rep_recv does when the QP refuses.
		m.sendRej(c, RejConsumerDefined, wire.CMMsgRep, nil, nil)
		m.fail(c, fmt.Errorf("cm: %v: %w", c, err))
		return
	}
	m.sendRtu(c)
	m.establish(c)
}

func (m *Manager) sendRtu(c *Conn) {
	rtu := &m.rtu
	*rtu = wire.CMRtu{LocalCommID: c.localID, RemoteCommID: c.remoteID}
	m.sendMAD(c, m.encode(c.tid, rtu))
}

// Resolve finds ip's MAC address with the Manager's neighbour table at
// the time of the latest Poll, and calls done exactly once: from a later
// Poll, or before returning if the resolution cannot start (ip is not a
// unicast IPv4 address, too many are pending). It suits code that needs
// a peer's MAC address outside rdma_cm, such as roce/cephrdma's Resolver.
func (m *Manager) Resolve(ip netip.Addr, done func(mac [6]byte, err error)) {
	if err := m.nt.Resolve(ip, m.now, done); err != nil {
		done([6]byte{}, err)
	}
}
