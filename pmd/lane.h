/* The data path's C state above a port: lanes gathered into ring sets,
 * the consumers a poll loop runs natively, the loop's dispatch state,
 * and the fused step that is a poll loop's one cgo call per RX queue and
 * iteration (lane.c). */
#ifndef CDD_LANE_H
#define CDD_LANE_H

#include "cdd.h"

#define CDD_MAX_SERVICES 64 /* a service set is a uint64_t mask */

/* A ring set is one service's lanes, one ring per poll loop that
 * receives, as the service's single consumer drains them: in turn,
 * starting one lane further on each call, so that one busy lane cannot
 * starve the others. Each ring keeps its own order, and a flow stays in
 * one lane (one RX queue, one loop), so a flow's order is kept. */
struct cdd_ringset {
	uint16_t n;
	uint16_t next;
	struct rte_ring *r[];
};

enum {
	CDD_NATIVE_SINK = 1,    /* count and free */
	CDD_NATIVE_FORWARD = 2, /* transmit out a port queue */
	CDD_NATIVE_FUNC = 3,    /* fn(arg): a consumer with state of its own (a service process's) */
};

/* A consumer implemented in C that a poll loop runs inside its one cgo
 * call per iteration. */
struct cdd_native {
	struct cdd_ringset *lanes; /* one lane (local) or all (owned) */
	uint16_t kind;
	uint16_t burst;
	uint16_t port, queue; /* forward */
	uint16_t npend;       /* forward: packets the TX queue has not taken yet */
	uint64_t pkts, bytes, drops;
	unsigned int (*fn)(void *); /* CDD_NATIVE_FUNC */
	void *arg;
	struct rte_mbuf *pend[CDD_MAX_BURST];
};

struct cdd_svc_delta {
	uint64_t pkts;
	uint64_t bytes;
	uint64_t drops;
};

/* A poll loop's C state: its lane of each service (NULL: closed), a
 * bucket per service for sorting a burst, per-service deltas of the last
 * dispatch, the native consumers the loop runs, and, per service, the
 * local native consumer of its lane (NULL if none) that the dispatcher
 * may hand packets directly. */
struct cdd_loop {
	struct rte_ring **rings;
	struct cdd_native **direct;
	uint16_t nrings;
	uint16_t cap;
	struct cdd_svc_delta *d;
	void **bucket; /* nrings × cap */
	struct cdd_native **natives;
	uint16_t nnatives;
};

unsigned int cdd_ringset_dequeue(struct cdd_ringset *s, struct rte_mbuf **m, unsigned int max);
uint16_t cdd_ringset_burst(struct cdd_burst *b, struct cdd_ringset *s, uint16_t max);
unsigned int cdd_ring_free_all(struct rte_ring *r);
unsigned int cdd_native_run(struct cdd_native *c);
unsigned int cdd_native_release(struct cdd_native *c);
uint32_t cdd_step(uintptr_t burst, uintptr_t loop, uint16_t port, uint16_t queue, int run_natives, int rx);

#endif
