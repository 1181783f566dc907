package trafficgen

import (
	"errors"
	"fmt"
)

// Mix says how much of each kind of traffic to generate and how often the
// variants occur.
type Mix struct {
	// Weights gives each kind's relative share of generated datagrams.
	// Kinds absent or with weight 0 are not generated.
	Weights map[Kind]int

	// VLAN is the probability that a MonV2, MonV1, OSD or RoCEv2 flow is
	// carried in an 802.1Q tag with ID StorageVLAN.
	VLAN float64
	// IPv6 is the probability that a MonV2, MonV1 or OSD flow runs over
	// IPv6 (fd99::/64) instead of IPv4.
	IPv6 float64
	// Fragmented is the probability that an ICMP echo or a DNS response is
	// large enough to be sent as two IPv4 fragments.
	Fragmented float64
	// Malformed is the probability that an untagged IPv4 MonV2, MonV1, OSD
	// or OtherTCP segment is damaged (see Defect).
	Malformed float64
}

// ErrBadMix is returned by Mix.Validate, wrapped with the reason.
var ErrBadMix = errors.New("trafficgen: bad mix")

// DefaultMix returns the mix of the committed sample capture: mostly OSD
// and RoCEv2 traffic, with the other kinds and every variant present.
func DefaultMix() Mix {
	return Mix{
		Weights: map[Kind]int{
			MonV2:    80,
			MonV1:    20,
			OSD:      450,
			RoCEv2:   150,
			ARP:      40,
			ICMP:     30,
			ICMPv6:   30,
			OtherTCP: 100,
			OtherUDP: 60,
		},
		VLAN:       0.2,
		IPv6:       0.15,
		Fragmented: 0.1,
		Malformed:  0.02,
	}
}

// Validate reports whether m can generate traffic: weights must name valid
// kinds, be non-negative and not all zero, and probabilities must lie in
// [0, 1].
func (m Mix) Validate() error {
	total := 0
	for k, w := range m.Weights {
		if !k.valid() {
			return fmt.Errorf("%w: weight for invalid %v", ErrBadMix, k)
		}
		if w < 0 {
			return fmt.Errorf("%w: negative weight %d for %v", ErrBadMix, w, k)
		}
		total += w
	}
	if total <= 0 {
		return fmt.Errorf("%w: no kind has a positive weight", ErrBadMix)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"VLAN", m.VLAN}, {"IPv6", m.IPv6}, {"Fragmented", m.Fragmented}, {"Malformed", m.Malformed}} {
		if !(p.v >= 0 && p.v <= 1) { // also rejects NaN
			return fmt.Errorf("%w: %s probability %v outside [0, 1]", ErrBadMix, p.name, p.v)
		}
	}
	return nil
}
