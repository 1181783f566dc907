package classify

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
)

// MaxRules is the number of rules a Classifier holds: one bit of a uint64
// per rule.
const MaxRules = 64

var (
	// ErrTooManyRules is returned by Compile when given more than MaxRules
	// rules.
	ErrTooManyRules = errors.New("too many rules")
	// ErrInvalidRule is wrapped by every error that rejects a rule.
	ErrInvalidRule = errors.New("invalid rule")
	// ErrServiceRange is returned for a service index outside
	// [0, numServices).
	ErrServiceRange = errors.New("service index out of range")
)

// RuleError is the error Compile returns for a rule it rejects.
type RuleError struct {
	Index int   // position of the rule in the slice given to Compile
	Err   error // what is wrong with it
}

func (e *RuleError) Error() string { return fmt.Sprintf("classify: rule %d: %v", e.Index, e.Err) }

func (e *RuleError) Unwrap() []error { return []error{e.Err, ErrInvalidRule} }

// PortRange is an inclusive range of TCP or UDP ports.
type PortRange struct{ Lo, Hi uint16 }

// Rule claims the frames that match all of its fields for a service. A zero
// or empty field matches anything.
type Rule struct {
	// Service is the index of the service that receives the matching
	// frames, in [0, numServices).
	Service int
	// EtherType matches the innermost ethertype, after any VLAN tags.
	EtherType uint16
	// Proto matches the IP protocol (ProtoTCP, ProtoUDP, ...); a rule with
	// a Proto never matches a frame that is not IP.
	Proto uint8
	// DstPorts and SrcPorts match TCP and UDP ports; a rule with ports
	// never matches a packet without them, such as a later fragment.
	DstPorts []PortRange
	SrcPorts []PortRange
	// DstPrefixes match the IPv4 or IPv6 destination address, or for ARP
	// the target protocol address: a rule for an endpoint's address also
	// claims the ARP requests for it.
	DstPrefixes []netip.Prefix
}

// Classifier maps frames to services. It is immutable once compiled and
// safe for concurrent use.
//
// Each lookup table maps a header value to the set of rules that accept it,
// as a bit mask; a rule that does not constrain a field has its bit set in
// every entry of that field's table.
type Classifier struct {
	numRules       int
	numServices    int
	defaultService int
	// service maps a rule to its service; the extra last entry, at the
	// index bits.TrailingZeros64 gives for an empty mask, is the default.
	service [MaxRules + 1]int

	etherType table16

	proto      [256]uint64 // IP packets, by protocol
	protoNonIP uint64      // frames that are not IP

	dstPorts table16
	srcPorts table16
	noPorts  uint64 // packets without ports: rules with no port ranges

	dst4, dst6 trie
	noAddr     uint64 // frames without an address: rules with no prefixes

	fast fastTables // Classify's, folded from the tables above
}

// Compile validates rules and builds the lookup tables. Rules are tried in
// order: the first that matches a frame claims it, and frames no rule
// claims go to defaultService. Errors about a rule are *RuleError values
// that wrap ErrInvalidRule.
func Compile(rules []Rule, numServices, defaultService int) (*Classifier, error) {
	if numServices < 1 {
		return nil, fmt.Errorf("classify: %d services, need at least 1: %w", numServices, ErrServiceRange)
	}
	if defaultService < 0 || defaultService >= numServices {
		return nil, fmt.Errorf("classify: default service %d not in [0, %d): %w", defaultService, numServices, ErrServiceRange)
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("classify: %d rules given, at most %d are supported: %w", len(rules), MaxRules, ErrTooManyRules)
	}
	for i := range rules {
		if err := validateRule(&rules[i], numServices); err != nil {
			return nil, &RuleError{Index: i, Err: err}
		}
	}

	c := &Classifier{
		numRules:       len(rules),
		numServices:    numServices,
		defaultService: defaultService,
	}
	var (
		anyEther, anyProto, anyDst, anySrc, anyAddr uint64
		etherKeys, dstKeys, srcKeys                 []keyRange
	)
	for i, r := range rules {
		bit := uint64(1) << i
		c.service[i] = r.Service
		if r.EtherType == 0 {
			anyEther |= bit
		} else {
			etherKeys = append(etherKeys, keyRange{r.EtherType, r.EtherType, bit})
		}
		if r.Proto == 0 {
			anyProto |= bit
		} else {
			c.proto[r.Proto] |= bit
		}
		if len(r.DstPorts) == 0 {
			anyDst |= bit
		}
		for _, pr := range r.DstPorts {
			dstKeys = append(dstKeys, keyRange{pr.Lo, pr.Hi, bit})
		}
		if len(r.SrcPorts) == 0 {
			anySrc |= bit
		}
		for _, pr := range r.SrcPorts {
			srcKeys = append(srcKeys, keyRange{pr.Lo, pr.Hi, bit})
		}
		if len(r.DstPrefixes) == 0 {
			anyAddr |= bit
		}
	}
	for p := range c.proto {
		c.proto[p] |= anyProto
	}
	c.protoNonIP = anyProto
	c.noPorts = anyDst & anySrc
	c.noAddr = anyAddr
	c.etherType = buildTable16(anyEther, etherKeys)
	c.dstPorts = buildTable16(anyDst, dstKeys)
	c.srcPorts = buildTable16(anySrc, srcKeys)

	b4, b6 := newTrieBuilder(4, anyAddr), newTrieBuilder(16, anyAddr)
	for i, r := range rules {
		bit := uint64(1) << i
		for j, p := range r.DstPrefixes {
			b := b4
			if p.Addr().Is6() {
				b = b6
			}
			if !b.insert(p.Masked(), bit) {
				return nil, &RuleError{Index: i, Err: fmt.Errorf("dst prefix %d (%v): destination prefixes need more than %d lookup nodes", j, p, maxTrieNodes)}
			}
		}
	}
	c.dst4, c.dst6 = b4.build(), b6.build()
	c.service[MaxRules] = defaultService
	c.buildFast()
	return c, nil
}

func validateRule(r *Rule, numServices int) error {
	if r.Service < 0 || r.Service >= numServices {
		return fmt.Errorf("service %d not in [0, %d): %w", r.Service, numServices, ErrServiceRange)
	}
	hasPorts := len(r.DstPorts) > 0 || len(r.SrcPorts) > 0
	switch r.EtherType {
	case EtherTypeVLAN, EtherTypeQinQ:
		return fmt.Errorf("ethertype %#04x is a VLAN tag; rules match the ethertype inside the tags", r.EtherType)
	case 0, EtherTypeIPv4, EtherTypeIPv6:
	default:
		if r.Proto != 0 || hasPorts {
			return fmt.Errorf("ethertype %#04x is not IP but the rule sets a protocol or ports, so it would never match", r.EtherType)
		}
	}
	if hasPorts && r.Proto != 0 && r.Proto != ProtoTCP && r.Proto != ProtoUDP {
		return fmt.Errorf("ports given for protocol %d, which has none (only TCP and UDP)", r.Proto)
	}
	for j, pr := range r.DstPorts {
		if pr.Lo > pr.Hi {
			return fmt.Errorf("dst port range %d: lo %d > hi %d", j, pr.Lo, pr.Hi)
		}
	}
	for j, pr := range r.SrcPorts {
		if pr.Lo > pr.Hi {
			return fmt.Errorf("src port range %d: lo %d > hi %d", j, pr.Lo, pr.Hi)
		}
	}
	for j, p := range r.DstPrefixes {
		if !p.IsValid() {
			return fmt.Errorf("dst prefix %d (%v) is not valid", j, p)
		}
		is4 := p.Addr().Is4()
		if (is4 && r.EtherType == EtherTypeIPv6) || (!is4 && (r.EtherType == EtherTypeIPv4 || r.EtherType == EtherTypeARP)) {
			return fmt.Errorf("dst prefix %d (%v) cannot match ethertype %#04x", j, p, r.EtherType)
		}
	}
	return nil
}

// NumRules returns the number of rules compiled.
func (c *Classifier) NumRules() int { return c.numRules }

// NumServices returns the number of services rules may name.
func (c *Classifier) NumServices() int { return c.numServices }

// DefaultService returns the service of frames no rule claims and of
// malformed frames.
func (c *Classifier) DefaultService() int { return c.defaultService }

// Classify parses frame and returns the service that claims it. A malformed
// frame goes to the default service, and reason says what is wrong with
// it; otherwise reason is ReasonNone. Classify does not allocate.
//
// The result is that of Parse and Match, which Classify bypasses for the
// common frames (see fast.go).
func (c *Classifier) Classify(frame []byte) (service int, reason Reason) {
	service, reason, _, _ = c.classify(frame)
	return service, reason
}

// ClassifyChain is Classify for a packet of pktLen bytes held in a chain
// of segments of which first is the first (see ParseChain): the headers
// are read from first, lengths checked against pktLen. A packet that fits
// in first (pktLen <= len(first)) costs what Classify costs.
func (c *Classifier) ClassifyChain(first []byte, pktLen int) (service int, reason Reason) {
	if pktLen <= len(first) {
		return c.Classify(first[:max(pktLen, 0)])
	}
	// Rare, so through Parse and Match.
	var h Headers
	if reason = parse(first, pktLen, &h); reason != ReasonNone {
		return c.defaultService, reason
	}
	service, _ = c.Match(&h)
	return service, ReasonNone
}

// ClassifyBurst classifies a burst of packets: frames[i] is the first
// segment of a packet of pktLens[i] bytes, and services[i] becomes the
// service ClassifyChain gives it, whose reason is counted in reasons. The
// three slices are of one length. It is the poll loop's: one call a
// burst, and a single-segment packet costs what Classify costs.
func (c *Classifier) ClassifyBurst(frames [][]byte, pktLens []uint32, services []uint8, reasons *[NumReasons]uint64) {
	pktLens = pktLens[:len(frames)]
	services = services[:len(frames)]
	for i, f := range frames {
		var s int
		var r Reason
		if int(pktLens[i]) == len(f) {
			s, r, _, _ = c.classify(f)
		} else {
			s, r = c.ClassifyChain(f, int(pktLens[i]))
		}
		services[i] = uint8(s)
		reasons[r]++
	}
}

// classifySlow is Classify for any frame, through Parse and Match.
func (c *Classifier) classifySlow(frame []byte) (service int, reason Reason) {
	var h Headers
	if reason = Parse(frame, &h); reason != ReasonNone {
		return c.defaultService, reason
	}
	service, _ = c.Match(&h)
	return service, ReasonNone
}

// Match returns the service claiming a frame whose headers Parse read
// without error, and the index of the rule that claims it, or -1 if no rule
// does and service is the default.
func (c *Classifier) Match(h *Headers) (service, rule int) {
	m := c.etherType.lookup(h.EtherType)
	if h.IPVersion != 0 {
		m &= c.proto[h.Proto]
	} else {
		m &= c.protoNonIP
	}
	if m == 0 {
		return c.defaultService, -1
	}
	if h.HasPorts {
		m &= c.dstPorts.lookup(h.DstPort) & c.srcPorts.lookup(h.SrcPort)
	} else {
		m &= c.noPorts
	}
	if m == 0 {
		return c.defaultService, -1
	}
	switch {
	case h.Dst.Is4():
		a := h.Dst.As4()
		m &= c.dst4.lookup(a[:])
	case h.Dst.Is6():
		a := h.Dst.As16()
		m &= c.dst6.lookup(a[:])
	default:
		m &= c.noAddr
	}
	if m == 0 {
		return c.defaultService, -1
	}
	rule = bits.TrailingZeros64(m)
	return c.service[rule&(MaxRules-1)], rule
}
