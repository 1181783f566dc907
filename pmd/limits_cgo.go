package pmd

/*
#include <rte_config.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_lcore.h>
#include "cdd.h"
*/
import "C"

// maxBurst is CDD_MAX_BURST, for the test that holds internal/config's
// MaxBurst to it.
const maxBurst = C.CDD_MAX_BURST

// nameLimits returns DPDK's name sizes, NUL included, and RTE_MAX_LCORE,
// for the tests that hold internal/config's limits to the headers.
func nameLimits() (memzone, ring, mempool, maxLcore int) {
	return C.RTE_MEMZONE_NAMESIZE, C.RTE_RING_NAMESIZE, C.RTE_MEMPOOL_NAMESIZE, C.RTE_MAX_LCORE
}
