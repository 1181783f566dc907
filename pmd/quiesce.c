/* The wait for poll loops after pdump removes a callback: see below. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <rte_ethdev.h>
#include "quiesce.h"

/* DPDK 22.11's pdump removes its RX/TX callbacks (rte_eth_remove_*_callback)
 * on the EAL's multi-process thread when a capture tool (dpdk-dumpcap,
 * dpdk-pdump) stops, replies, and the tool then frees the ring and mempool
 * the callback copies into. Removal does not wait for a burst already
 * inside the callback (rte_ethdev.h leaves that to the application; later
 * DPDK's pdump waits itself), so a poll loop preempted there copies into
 * freed memory: the daemon crashed so under load. The executable defines
 * both functions, and the dynamic linker binds librte_pdump's calls to
 * these: each calls DPDK's own, then waits until every poll loop has
 * begun an iteration since, so none is still inside the old callback.
 *
 * The slots are process-wide because these functions are: their callers
 * pass no context, and a process has one EAL. */

#define CDD_QUIESCE_OFFLINE UINT64_MAX
#define CDD_QUIESCE_WAIT_NS 5000000000ull /* a loop stalled longer is stuck: go on */
#define CDD_QUIESCE_NAP_NS 20000

/* A slot counts one poll loop's iterations; CDD_QUIESCE_OFFLINE while it
 * does not poll. */
struct cdd_quiesce_slot {
	uint64_t n;
} __rte_cache_aligned;

static struct cdd_quiesce_slot cdd_quiesce_slot[CDD_QUIESCE_SLOTS];
static uint64_t cdd_quiesce_calls, cdd_quiesce_wait_ns, cdd_quiesce_timeouts;

uint64_t *cdd_quiesce_slot_n(int i) { return &cdd_quiesce_slot[i].n; }

void cdd_quiesce_init(void)
{
	for (int i = 0; i < CDD_QUIESCE_SLOTS; i++)
		__atomic_store_n(&cdd_quiesce_slot[i].n, CDD_QUIESCE_OFFLINE, __ATOMIC_RELAXED);
}

static uint64_t cdd_quiesce_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* cdd_quiesce waits until every online loop has counted an iteration
 * since the call. */
void cdd_quiesce(void)
{
	uint64_t snap[CDD_QUIESCE_SLOTS];
	for (int i = 0; i < CDD_QUIESCE_SLOTS; i++)
		snap[i] = __atomic_load_n(&cdd_quiesce_slot[i].n, __ATOMIC_SEQ_CST);
	uint64_t t = cdd_quiesce_now();
	int timedout = 0;
	for (int i = 0; i < CDD_QUIESCE_SLOTS && !timedout; i++) {
		if (snap[i] == CDD_QUIESCE_OFFLINE)
			continue;
		while (__atomic_load_n(&cdd_quiesce_slot[i].n, __ATOMIC_SEQ_CST) == snap[i]) {
			if (cdd_quiesce_now() - t > CDD_QUIESCE_WAIT_NS) {
				timedout = 1;
				break;
			}
			struct timespec nap = {0, CDD_QUIESCE_NAP_NS};
			nanosleep(&nap, NULL);
		}
	}
	__atomic_add_fetch(&cdd_quiesce_calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cdd_quiesce_wait_ns, cdd_quiesce_now() - t, __ATOMIC_RELAXED);
	if (timedout)
		__atomic_add_fetch(&cdd_quiesce_timeouts, 1, __ATOMIC_RELAXED);
}

typedef int (*cdd_remove_cb_fn)(uint16_t, uint16_t, const struct rte_eth_rxtx_callback *);

static int cdd_remove_and_quiesce(const char *name, uint16_t port, uint16_t queue,
				  const struct rte_eth_rxtx_callback *cb)
{
	cdd_remove_cb_fn real = (cdd_remove_cb_fn)dlsym(RTLD_NEXT, name);
	if (real == NULL)
		return -ENOSYS;
	int rc = real(port, queue, cb);
	if (rc == 0)
		cdd_quiesce();
	return rc;
}

int rte_eth_remove_rx_callback(uint16_t port_id, uint16_t queue_id,
			       const struct rte_eth_rxtx_callback *user_cb)
{
	return cdd_remove_and_quiesce("rte_eth_remove_rx_callback", port_id, queue_id, user_cb);
}

int rte_eth_remove_tx_callback(uint16_t port_id, uint16_t queue_id,
			       const struct rte_eth_rxtx_callback *user_cb)
{
	return cdd_remove_and_quiesce("rte_eth_remove_tx_callback", port_id, queue_id, user_cb);
}

void cdd_quiesce_stats(uint64_t *v)
{
	v[0] = __atomic_load_n(&cdd_quiesce_calls, __ATOMIC_RELAXED);
	v[1] = __atomic_load_n(&cdd_quiesce_wait_ns, __ATOMIC_RELAXED);
	v[2] = __atomic_load_n(&cdd_quiesce_timeouts, __ATOMIC_RELAXED);
}

/* For tests: remove a callback that was never added, through the
 * interposed function, as pdump would call it. */
int cdd_quiesce_remove_none(uint16_t port)
{
	return rte_eth_remove_rx_callback(port, 0, NULL);
}
