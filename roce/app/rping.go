package app

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// RPingInfoLen is the size of rping's struct rping_rdma_info.
const RPingInfoLen = 16

// DefaultRPingMaxSize is the largest ping buffer RPingServer reads:
// rping's RPING_BUFSIZE, above its largest -S.
const DefaultRPingMaxSize = 64 << 10

// RPingInfo is rping's struct rping_rdma_info, the message a client
// sends to advertise a buffer: its address, R_Key and size, in network
// byte order (librdmacm/examples/rping.c).
type RPingInfo struct {
	Addr uint64
	RKey uint32
	Size uint32
}

// Decode parses p, which must be exactly RPingInfoLen bytes: rping's
// server rejects any other receive length ("Received bogus data").
func (i *RPingInfo) Decode(p []byte) error {
	if len(p) != RPingInfoLen {
		return fmt.Errorf("app: rping info of %d bytes, want %d: %w", len(p), RPingInfoLen, ErrProtocol)
	}
	i.Addr = binary.BigEndian.Uint64(p[0:8])
	i.RKey = binary.BigEndian.Uint32(p[8:12])
	i.Size = binary.BigEndian.Uint32(p[12:16])
	return nil
}

// Encode writes i into p[:RPingInfoLen]; p must be at least that long.
func (i *RPingInfo) Encode(p []byte) error {
	if len(p) < RPingInfoLen {
		return fmt.Errorf("app: encode rping info into %d bytes: %w", len(p), roce.ErrInvalidArgument)
	}
	binary.BigEndian.PutUint64(p[0:8], i.Addr)
	binary.BigEndian.PutUint32(p[8:12], i.RKey)
	binary.BigEndian.PutUint32(p[12:16], i.Size)
	return nil
}

// RPingConfig configures an RPingServer.
type RPingConfig struct {
	// MaxSize is the largest buffer a client may advertise, the size of
	// the server's ping buffer (DefaultRPingMaxSize if 0).
	MaxSize int

	Allocator    roce.Allocator // buffer memory (a HeapAllocator if nil)
	MaxConns     int            // connections at once (DefaultMaxConns if 0)
	StallTimeout time.Duration  // fail a connection whose RDMA or SEND makes no progress this long (0: never)
}

// RPingServer plays the server role of librdmacm's rping, which needs
// RDMA READ and WRITE as requester. Each round (rping.c "ping/pong
// loop"): the client advertises its source buffer; the server RDMA READs
// it into its own buffer and SENDs a 16-byte "go ahead"; the client
// advertises its sink buffer; the server RDMA WRITEs the ping data there,
// up to and including its first NUL as rping does, and SENDs "go ahead"
// again. The client decides how many rounds run (-C) and disconnects;
// the server never reports a connection done unless it fails.
//
// The connection manager must give the QP an initiator depth
// (MaxRdAtomic) of at least 1, from the REQ's responder resources.
//
// In Stats a round counts as one message in (the two advertisements) and
// one out (the two "go ahead"s) per advertisement.
type RPingServer struct {
	cfg     RPingConfig
	*server // Established, Close, Poll, Stats, Shutdown
}

var _ Server = (*RPingServer)(nil)

// NewRPingServer returns an rping server for connections on ep.
func NewRPingServer(ep *roce.Endpoint, cfg RPingConfig) (*RPingServer, error) {
	orDefault(&cfg.MaxSize, DefaultRPingMaxSize)
	if cfg.MaxSize > roce.MaxMessage-rpRDMAOff {
		return nil, fmt.Errorf("app: new rping server: size %d too large: %w", cfg.MaxSize, roce.ErrInvalidArgument)
	}
	srv, err := newServer("rping", ep, cfg.Allocator, cfg.MaxConns, cfg.StallTimeout)
	if err != nil {
		return nil, err
	}
	return &RPingServer{cfg: cfg, server: srv}, nil
}

// Layout of an rping connection's region: two receive buffers, the "go
// ahead" message (zeros, as rping's server sends its never-filled
// send_buf) and the ping buffer.
const (
	rpRecvBufs = 2
	rpSendOff  = rpRecvBufs * RPingInfoLen
	rpRDMAOff  = rpSendOff + RPingInfoLen
	// rpSendDepth leaves room for "go ahead" SENDs whose ACKs are late
	// besides the one RDMA operation in flight.
	rpSendDepth = 8
)

// Accept implements Service.
func (r *RPingServer) Accept(done func(error)) (*roce.QP, error) {
	qc := roce.QPCap{MaxSendWR: rpSendDepth, MaxRecvWR: rpRecvBufs}
	return r.server.accept(done, rpRDMAOff+r.cfg.MaxSize, qc, func(res *qpResources) (protocol, error) {
		c := &rpingConn{res: res, maxSize: r.cfg.MaxSize, cnt: &r.server.cnt}
		for i := range rpRecvBufs {
			if err := c.postRecv(i); err != nil {
				return nil, err
			}
		}
		return c, nil
	})
}

// rpingPhase is where a connection is in the ping/pong round.
type rpingPhase uint8

const (
	rpWantSource rpingPhase = iota // waiting for the source advertisement
	rpReading                      // RDMA READ of the source in flight
	rpWantSink                     // waiting for the sink advertisement
	rpWriting                      // RDMA WRITE to the sink in flight
)

// Work request IDs on the send queue.
const (
	rpWRGoAhead = iota + 1
	rpWRRead
	rpWRWrite
)

type rpingConn struct {
	res     *qpResources
	maxSize int
	cnt     *counters

	phase   rpingPhase
	readLen int  // bytes of the last ping read
	goAhead bool // a "go ahead" waits for a send queue slot
	info    RPingInfo

	wcs [8]roce.WorkCompletion
	sge [1]roce.SGE
	swr roce.SendWR
	rwr roce.RecvWR
}

func (c *rpingConn) postRecv(i int) error {
	c.sge[0] = c.res.mr.SGE(i*RPingInfoLen, RPingInfoLen)
	c.rwr = roce.RecvWR{ID: uint64(i), SGList: c.sge[:]}
	return c.res.qp.PostRecv(&c.rwr)
}

func (c *rpingConn) start() error { return nil }

func (c *rpingConn) busy() bool {
	qp := c.res.qp
	return c.phase == rpReading || c.phase == rpWriting || c.goAhead ||
		qp.SendQueueFree() < qp.Cap().MaxSendWR
}

func (c *rpingConn) poll(time.Time) (int, bool, error) {
	qp := c.res.qp
	work, err := drain(c.res.scq, c.wcs[:], c.sendDone)
	if err != nil {
		return work, false, err
	}
	if c.goAhead && qp.SendQueueFree() > 0 {
		if err := c.postGoAhead(); err != nil {
			return work, false, err
		}
		work++
	}
	// An advertisement is taken only when the round expects one; a client
	// that runs ahead waits in the receive queue.
	for !c.goAhead && (c.phase == rpWantSource || c.phase == rpWantSink) {
		if c.res.rcq.Poll(c.wcs[:1]) == 0 {
			break
		}
		if err := c.advertised(&c.wcs[0]); err != nil {
			return work, false, err
		}
		work++
	}
	return work, false, nil
}

// sendDone handles a send queue completion.
func (c *rpingConn) sendDone(wc *roce.WorkCompletion) error {
	qp := c.res.qp
	if wc.Status != roce.WCSuccess {
		return wcError(qp, wc, "send queue")
	}
	switch {
	case wc.Opcode == roce.WCSend && wc.WRID == rpWRGoAhead:
		c.cnt.out(int(wc.ByteLen))
		return nil
	case wc.Opcode == roce.WCRDMARead && wc.WRID == rpWRRead && c.phase == rpReading:
		c.cnt.rdmaReads.Add(1)
		c.cnt.rdmaBytesDone.Add(uint64(wc.ByteLen))
		c.phase = rpWantSink
	case wc.Opcode == roce.WCRDMAWrite && wc.WRID == rpWRWrite && c.phase == rpWriting:
		c.cnt.rdmaWrites.Add(1)
		c.cnt.rdmaBytesDone.Add(uint64(wc.ByteLen))
		c.phase = rpWantSource
	default:
		return wcError(qp, wc, fmt.Sprintf("rping phase %d", c.phase))
	}
	c.goAhead = true
	if qp.SendQueueFree() > 0 {
		return c.postGoAhead()
	}
	return nil
}

func (c *rpingConn) postGoAhead() error {
	c.sge[0] = c.res.mr.SGE(rpSendOff, RPingInfoLen)
	c.swr = roce.SendWR{ID: rpWRGoAhead, Opcode: roce.WRSend, Flags: roce.SendSignaled, SGList: c.sge[:]}
	if err := c.res.qp.PostSend(&c.swr); err != nil {
		return err
	}
	c.goAhead = false
	return nil
}

// advertised handles a received buffer advertisement: READ the source,
// or WRITE the ping data to the sink.
func (c *rpingConn) advertised(wc *roce.WorkCompletion) error {
	qp := c.res.qp
	if wc.Status != roce.WCSuccess || wc.Opcode != roce.WCRecv || wc.WRID >= rpRecvBufs {
		return wcError(qp, wc, "advertisement")
	}
	if wc.ByteLen != RPingInfoLen {
		return fmt.Errorf("app: rping advertisement of %d bytes, want %d: %w", wc.ByteLen, RPingInfoLen, ErrProtocol)
	}
	off := int(wc.WRID) * RPingInfoLen
	if err := c.info.Decode(c.res.mem[off : off+RPingInfoLen]); err != nil {
		return err
	}
	c.cnt.in(int(wc.ByteLen))
	if err := c.postRecv(int(wc.WRID)); err != nil {
		return err
	}
	if int64(c.info.Size) > int64(c.maxSize) {
		return fmt.Errorf("app: rping buffer of %d bytes advertised, at most %d: %w", c.info.Size, c.maxSize, ErrProtocol)
	}
	c.swr = roce.SendWR{Flags: roce.SendSignaled, SGList: c.sge[:], RemoteAddr: c.info.Addr, RKey: c.info.RKey}
	if c.phase == rpWantSource {
		c.readLen = int(c.info.Size)
		c.sge[0] = c.res.mr.SGE(rpRDMAOff, c.readLen)
		c.swr.ID, c.swr.Opcode = rpWRRead, roce.WRRDMARead
		c.phase = rpReading
	} else {
		// rping writes strlen(ping)+1 bytes: the string and its NUL.
		ping := c.res.mem[rpRDMAOff : rpRDMAOff+c.readLen]
		n := len(ping)
		if k := bytes.IndexByte(ping, 0); k >= 0 {
			n = k + 1
		}
		n = min(n, int(c.info.Size))
		c.sge[0] = c.res.mr.SGE(rpRDMAOff, n)
		c.swr.ID, c.swr.Opcode = rpWRWrite, roce.WRRDMAWrite
		c.phase = rpWriting
	}
	if c.sge[0].Length == 0 {
		c.swr.SGList = nil
	}
	return qp.PostSend(&c.swr)
}
