package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Limits of DPDK 22.11 that names and lcores must fit. DPDK checks them
// only when the daemon creates the object; validation checks them first.
// pmd's tests compare them with the C headers.
const (
	// memzoneNameMax is the longest memzone name: RTE_MEMZONE_NAMESIZE
	// (rte_memzone.h) less the terminating NUL.
	memzoneNameMax = 31
	// RingNameMax is the longest ring name (RTE_RING_NAMESIZE,
	// rte_ring_core.h): a ring's memzone is named "RG_<ring>".
	RingNameMax = memzoneNameMax - len("RG_")
	// MempoolNameMax is the longest mempool name (RTE_MEMPOOL_NAMESIZE,
	// rte_mempool.h): a pool's own ring and memzones are named "MP_<pool>".
	MempoolNameMax = RingNameMax - len("MP_")
	// MaxBurst bounds burst_size and kernel.budget: the bursts the data
	// path keeps are arrays of CDD_MAX_BURST (pmd/cdd.h).
	MaxBurst = 512
	// MaxLcores bounds lcore IDs: RTE_MAX_LCORE of Debian's DPDK build.
	MaxLcores = 128
	// MaxMbufs bounds the pool: its ring holds the next power of two above
	// the count, at most 2^30 in a DPDK ring (RTE_RING_SZ_MASK).
	MaxMbufs = 1<<30 - 1
	// MaxMemoryMB bounds eal.memory_mb and roce.memory_mb (1 TiB), which
	// also keeps their byte counts far from overflowing.
	MaxMemoryMB = 1 << 20
)

// namePrefix starts the name of every DPDK object the daemon creates.
const namePrefix = "cdd_"

// PoolName is the DPDK name of the port's mbuf pool.
func (c *Config) PoolName() string { return namePrefix + c.Port.Name }

// RingName is the DPDK name of a service's ring for a lane (see Lanes),
// which secondary processes look it up by: cdd_<port>_<service>, with
// ".<lane>" after it from lane 1 on ('.' is in no service name, so the
// names cannot collide).
func (c *Config) RingName(service string, lane int) string {
	name := namePrefix + c.Port.Name + "_" + service
	if lane > 0 {
		name += "." + strconv.Itoa(lane)
	}
	return name
}

// validatePortName checks port.name: it goes into metrics labels, the
// default file prefix and every DPDK name, so it takes the service name
// charset and must leave the pool name within DPDK's limit.
func (c *Config) validatePortName(bad func(path, format string, args ...any)) bool {
	n := c.Port.Name
	switch {
	case n == "":
		bad("port.name", "required")
	case !nameCharsRE.MatchString(n):
		bad("port.name", "%q: lower-case letters, digits, '-' and '_', starting with a letter", n)
	case len(c.PoolName()) > MempoolNameMax:
		bad("port.name", "%q is %d characters: the mbuf pool name %q would be %d, over DPDK's limit of %d for mempool names (RTE_MEMPOOL_NAMESIZE); use at most %d",
			n, len(n), c.PoolName(), len(c.PoolName()), MempoolNameMax, MempoolNameMax-len(namePrefix))
	default:
		return true
	}
	return false
}

var nameCharsRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// validateRingName checks that service i's ring names, the last lane's
// the longest, fit DPDK's limit. Call it only with a valid port name.
func (c *Config) validateRingName(i int, bad func(path, format string, args ...any)) {
	s := c.Services[i].Name
	last := c.Lanes() - 1
	if r := c.RingName(s, last); len(r) > RingNameMax {
		bad(fmt.Sprintf("services[%d].name", i), "%q makes the ring name %q %d characters, over DPDK's limit of %d for ring names (RTE_RING_NAMESIZE); with port %q and %d receiving poll loops use at most %d",
			s, r, len(r), RingNameMax, c.Port.Name, last+1, RingNameMax-len(c.RingName("", last)))
	}
}

// ealOptionsSet are the EAL options the daemon builds from the eal and
// port sections, with the setting that owns each. Given again in
// eal.extra_args they either fail the start (-l twice; -m with
// --socket-mem) or silently override what validation checked.
var ealOptionsSet = map[string]string{
	"-l": "eal.lcores", "-c": "eal.lcores", "--lcores": "eal.lcores",
	"--main-lcore": "eal.main_lcore", "--master-lcore": "eal.main_lcore",
	"-m": "eal.memory_mb", "--socket-mem": "eal.memory_mb",
	"--no-huge": "eal.no_huge", "--huge-dir": "eal.huge_dir",
	"--file-prefix": "eal.file_prefix",
}

// validateExtraArgs refuses EAL options in eal.extra_args that the daemon
// sets itself.
func (c *Config) validateExtraArgs(bad func(path, format string, args ...any)) {
	for i, a := range c.EAL.ExtraArgs {
		opt, _, _ := strings.Cut(a, "=")
		if len(opt) > 2 && opt[1] != '-' { // -l0-3: a short option with its value
			opt = opt[:2]
		}
		if owner, ok := ealOptionsSet[opt]; ok {
			bad(fmt.Sprintf("eal.extra_args[%d]", i), "%q: the daemon sets %s from %s; set it there", a, opt, owner)
		}
	}
}
