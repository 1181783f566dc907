package cm

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/neigh"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Config defaults.
const (
	DefaultMaxConns = 1024
	// DefaultPathMTU is what rdma_cm computes for a 1500-byte link
	// (iboe_get_mtu: 1500 − headers → 1024).
	DefaultPathMTU    = 1024
	DefaultMaxPathMTU = wire.MaxMTU
	// DefaultMinRNRTimer is the RNR NAK timer code of the QPs the Manager
	// connects: 0x0E = 1.28 ms (see the package comment).
	DefaultMinRNRTimer = 0x0E
	// DefaultTimeout is the transport timeout code of actively connected
	// QPs and the local ACK timeout their REQ advertises: 4.096 µs·2^14 ≈
	// 67 ms, far above a LAN's round trip, so that a lost packet is sent
	// again soon (Ceph asks for 0x12, about 1.07 s).
	DefaultTimeout = 0x0E
	// DefaultRetryCount is the transport retry count REQs ask the peer
	// to use: 7, what librdmacm applications send.
	DefaultRetryCount = 7
	// DefaultMaxRetryCount caps the retry count of our own QPs. rxe and
	// package roce treat 7 as unlimited; 6 makes a QP whose peer vanished
	// fail after 7 timeouts, so that its resources are freed.
	DefaultMaxRetryCount = 6
	// DefaultRNRRetry is the RNR retry count asked in REQs and granted in
	// REPs: 7, unlimited, since receivers keep buffers posted.
	DefaultRNRRetry = 7
	// DefaultRdAtomic bounds responder resources and initiator depth.
	DefaultRdAtomic = roce.MaxRdAtomic
	DefaultHopLimit = 64
	// DefaultCMResponseTimeout is the CM response timeout code in REQs:
	// Linux retransmits its REP every 2^(code−8) ms = 1.024 s.
	DefaultCMResponseTimeout = 18
	// DefaultRetransmitTimeout is how long the Manager waits for an
	// answer to its REQ, REP or DREQ before sending it again.
	DefaultRetransmitTimeout = time.Second
	// DefaultMaxRetries bounds those retransmissions; REQs advertise it
	// (Linux's CMA_MAX_CM_RETRIES).
	DefaultMaxRetries = 15
	// LANMaxRetries is a MaxRetries for peers on one LAN, cephdpdkd's:
	// the Manager gives up on a silent peer within a few seconds, since
	// rxe answers in well under one.
	LANMaxRetries       = 5
	DefaultTimeWait     = time.Second
	DefaultCommandQueue = 64
	// targetACKDelay is what REPs advertise: rxe's local_ca_ack_delay.
	targetACKDelay = 15
)

// Config configures a Manager. Zero fields take their defaults.
type Config struct {
	// Neigh answers ARP and resolves peers; nil makes New create one for
	// the endpoint's address with default settings. The Manager installs
	// its frame and neighbour hooks on the endpoint and polls it.
	Neigh *neigh.Table

	MaxConns int // connections in any state, time-wait included

	// PathMTU is the path MTU Dial asks for; MaxPathMTU the largest a
	// REQ may ask for (larger ones are rejected with RejInvalidMTU). Set
	// both from the link MTU: 1024 for 1500, 4096 for 9000.
	PathMTU, MaxPathMTU int

	MinRNRTimer uint8 // RNR NAK timer code of connected QPs (0x01..0x1F)
	Timeout     uint8 // transport timeout code of actively connected QPs
	RetryCount  uint8 // transport retry count asked for in REQs (1..7)
	// MaxRetryCount caps the transport retry count of connected QPs
	// (1..7; 7 is unlimited).
	MaxRetryCount uint8
	RNRRetry      uint8 // RNR retry count asked for in REQs and granted in REPs (1..7)
	// ResponderResources bounds the RDMA READs a connected QP serves at
	// once; InitiatorDepth those it issues (1..roce.MaxRdAtomic).
	ResponderResources, InitiatorDepth int
	TrafficClass                       uint8 // IPv4 TOS of actively connected QPs
	HopLimit                           uint8 // IPv4 TTL of actively connected QPs

	CMResponseTimeout uint8         // code written to REQs (0..31)
	RetransmitTimeout time.Duration // REQ, REP and DREQ retransmission interval
	MaxRetries        int           // retransmissions before giving up
	TimeWait          time.Duration // closed connections kept to answer duplicates
	CommandQueue      int           // capacity of the Do queue

	// Seed seeds the generator of communication IDs, PSNs and ports; 0
	// seeds it from crypto/rand.
	Seed uint64

	// Log, if set, gets a line for each REJ sent (at most one a second
	// per reason, with a count of those left out): a refused client is
	// then never a mystery to the operator.
	Log *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	orDefault(&c.MaxConns, DefaultMaxConns)
	orDefault(&c.PathMTU, DefaultPathMTU)
	orDefault(&c.MaxPathMTU, DefaultMaxPathMTU)
	orDefault(&c.MinRNRTimer, DefaultMinRNRTimer)
	orDefault(&c.Timeout, DefaultTimeout)
	orDefault(&c.RetryCount, DefaultRetryCount)
	orDefault(&c.MaxRetryCount, DefaultMaxRetryCount)
	orDefault(&c.RNRRetry, DefaultRNRRetry)
	orDefault(&c.ResponderResources, DefaultRdAtomic)
	orDefault(&c.InitiatorDepth, DefaultRdAtomic)
	orDefault(&c.HopLimit, DefaultHopLimit)
	orDefault(&c.CMResponseTimeout, DefaultCMResponseTimeout)
	orDefault(&c.MaxRetries, DefaultMaxRetries)
	orDefault(&c.CommandQueue, DefaultCommandQueue)
	orDefault(&c.RetransmitTimeout, DefaultRetransmitTimeout)
	orDefault(&c.TimeWait, DefaultTimeWait)
	_, okMTU := wire.MTUEnum(c.PathMTU)
	_, okMax := wire.MTUEnum(c.MaxPathMTU)
	switch {
	case !okMTU || !okMax || c.PathMTU > c.MaxPathMTU:
		return c, fmt.Errorf("cm: path mtu %d / max %d: %w", c.PathMTU, c.MaxPathMTU, ErrInvalidArgument)
	case c.MinRNRTimer > roce.MaxTimerCode || c.Timeout > roce.MaxTimerCode || c.CMResponseTimeout > roce.MaxTimerCode:
		return c, fmt.Errorf("cm: timer codes %d/%d/%d not in 0..%d: %w", c.MinRNRTimer, c.Timeout, c.CMResponseTimeout, roce.MaxTimerCode, ErrInvalidArgument)
	case c.RetryCount > roce.MaxRetry || c.MaxRetryCount > roce.MaxRetry || c.RNRRetry > roce.MaxRetry:
		return c, fmt.Errorf("cm: retry counts %d/%d/%d not in 0..%d: %w", c.RetryCount, c.MaxRetryCount, c.RNRRetry, roce.MaxRetry, ErrInvalidArgument)
	case c.ResponderResources > roce.MaxRdAtomic || c.InitiatorDepth > roce.MaxRdAtomic:
		return c, fmt.Errorf("cm: rd atomic %d/%d exceeds %d: %w", c.ResponderResources, c.InitiatorDepth, roce.MaxRdAtomic, ErrInvalidArgument)
	}
	return c, nil
}

// orDefault sets *v to d when it is not positive: not set.
func orDefault[T int | uint8 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
