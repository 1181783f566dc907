/* The interrupt-thread gate: see gate_cgo.go. */
#include "gate.h"

static uint64_t cdd_gate_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* cdd_gate_cb runs on DPDK's interrupt thread, in every round of its
 * epoll loop: the gate's eventfd is never read, so it is always ready.
 * Entering, it closes the window the previous call opened (the thread has
 * run the other sources' callbacks since) and lets the loops go; it then
 * parks the thread for a period, and before returning holds the loops:
 * it waits until every registered loop has started an iteration after
 * the hold, so none is inside a driver call when the thread goes on to
 * the other callbacks. */
static void cdd_gate_add(uint64_t *sum, uint64_t *max, uint64_t d)
{
	__atomic_store_n(sum, *sum + d, __ATOMIC_RELAXED);
	if (d > *max)
		__atomic_store_n(max, d, __ATOMIC_RELAXED);
}

static void cdd_gate_cb(void *arg)
{
	struct cdd_gate *g = arg;
	if (g->acked_at) {
		/* The loops lost the time from the first one's held pass on. */
		uint64_t first = UINT64_MAX;
		for (int i = 0; i < CDD_GATE_SLOTS; i++) {
			uint64_t h = __atomic_load_n(&g->slot[i].held_at, __ATOMIC_RELAXED);
			if (h >= g->hold_t && h < first)
				first = h;
		}
		uint64_t now = cdd_gate_now();
		if (first < now)
			cdd_gate_add(&g->held_ns, &g->max_held_ns, now - first);
		g->acked_at = 0;
	}
	__atomic_store_n(&g->run, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE)) {
		/* Closing: make the eventfd quiet so that this is the last call. */
		uint64_t v;
		ssize_t r = read(g->efd, &v, sizeof(v));
		(void)r;
		return;
	}
	struct timespec ts = {(time_t)(g->period_ns / 1000000000ull), (long)(g->period_ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE))
		return; /* the next call quiets the eventfd; the loops keep going */
	uint64_t t = cdd_gate_now();
	g->hold_t = t;
	__atomic_store_n(&g->run, 0, __ATOMIC_SEQ_CST);
	uint64_t e = __atomic_add_fetch(&g->epoch, 1, __ATOMIC_SEQ_CST);
	/* Spin: a loop reports within an iteration, microseconds, and the
	 * thread must not sleep then: a wakeup on a busy CPU can take
	 * milliseconds, all of which the loops that reported would spend
	 * held. (DPDK keeps its control threads off the worker lcores' CPUs,
	 * so the spin takes no CPU from a loop.) A loop that has not
	 * reported after CDD_GATE_SPIN_NS is not running; nap between looks
	 * then rather than take the CPU from whoever shares it. */
	for (int i = 0; i < CDD_GATE_SLOTS; i++) {
		for (unsigned int k = 1; __atomic_load_n(&g->slot[i].seen, __ATOMIC_SEQ_CST) < e; k++) {
			if (k % 64 != 0 || cdd_gate_now() - t < CDD_GATE_SPIN_NS) {
				rte_pause();
			} else {
				struct timespec nap = {0, CDD_GATE_NAP_NS};
				nanosleep(&nap, NULL);
			}
		}
	}
	g->acked_at = cdd_gate_now();
	cdd_gate_add(&g->wait_ns, &g->max_wait_ns, g->acked_at - t);
	__atomic_store_n(&g->windows, g->windows + 1, __ATOMIC_RELAXED);
}

struct cdd_gate *cdd_gate_new(uint64_t period_ns, int *err)
{
	struct cdd_gate *g = rte_zmalloc("cdd_gate", sizeof(*g), RTE_CACHE_LINE_SIZE);
	if (g == NULL) {
		*err = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < CDD_GATE_SLOTS; i++)
		g->slot[i].seen = UINT64_MAX;
	g->period_ns = period_ns;
	g->efd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC); /* readable from the start */
	if (g->efd < 0) {
		*err = errno;
		rte_free(g);
		return NULL;
	}
	g->ih = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	int rc;
	if (g->ih == NULL) {
		*err = rte_errno;
		goto fail;
	}
	if ((rc = rte_intr_fd_set(g->ih, g->efd)) != 0 ||
	    (rc = rte_intr_type_set(g->ih, RTE_INTR_HANDLE_EXT)) != 0 ||
	    (rc = rte_intr_callback_register(g->ih, cdd_gate_cb, g)) != 0) {
		*err = -rc;
		goto fail;
	}
	return g;
fail:
	rte_intr_instance_free(g->ih);
	close(g->efd);
	rte_free(g);
	return NULL;
}

/* cdd_gate_free stops the parking and waits for the interrupt thread to
 * leave the callback for good. */
int cdd_gate_free(struct cdd_gate *g)
{
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
	int rc = rte_intr_callback_unregister_sync(g->ih, cdd_gate_cb, g);
	rte_intr_instance_free(g->ih);
	close(g->efd);
	rte_free(g);
	return rc < 0 ? rc : 0;
}

static void cdd_gate_probe_cb(void *arg)
{
	struct cdd_gate_probe *p = arg;
	struct cdd_gate *g = p->g;
	p->run = __atomic_load_n(&g->run, __ATOMIC_SEQ_CST);
	uint64_t e = __atomic_load_n(&g->epoch, __ATOMIC_SEQ_CST);
	for (int i = 0; i < CDD_GATE_SLOTS; i++)
		if (__atomic_load_n(&g->slot[i].seen, __ATOMIC_SEQ_CST) < e)
			p->unheld++;
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
}

int cdd_gate_probe_set(struct cdd_gate_probe *p)
{
	return rte_eal_alarm_set(1, cdd_gate_probe_cb, p);
}

int cdd_gate_probe_done(struct cdd_gate_probe *p)
{
	return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
}

void cdd_gate_stats(struct cdd_gate *g, uint64_t out[5])
{
	out[0] = __atomic_load_n(&g->windows, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&g->wait_ns, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&g->max_wait_ns, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&g->held_ns, __ATOMIC_RELAXED);
	out[4] = __atomic_load_n(&g->max_held_ns, __ATOMIC_RELAXED);
}
