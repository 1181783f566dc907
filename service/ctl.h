/* The shared-memory contract between cephdpdkd (the DPDK primary) and a
 * service process attached to one of its services (a DPDK secondary):
 * the control block in the memzone "cdds.<service>", the rings it names,
 * and both sides' steps on them. Package service (the process side) and
 * package consumer (the daemon side, consumer.Process) include it; the
 * protocol lives only here.
 *
 * Rings, all with one producer and one consumer:
 *   lanes  daemon's poll loops -> process   received packets (one per loop)
 *   tx     process -> daemon                frames to transmit
 *   ret    process -> daemon                mbufs the process is done with
 *   buf    daemon -> process                fresh mbufs to send from
 * The process never frees into, nor allocates from, the shared mbuf pool:
 * a process killed inside a multi-producer/multi-consumer pool operation
 * would leave the pool's ring half-updated and stall the daemon.
 *
 * Accounting: every mbuf is, at every instant, in exactly one place the
 * daemon can find after the process is gone, decided by single-word
 * stores the process makes in a fixed order:
 *   - in a ring, between the consumer's tail and the producer's tail;
 *   - in a dequeue the process began (rte_ring_*_start) and did not
 *     finish: still in the ring, between cons.tail and cons.head (the
 *     producer reuses no slot before cons.tail);
 *   - in an enqueue the process began and did not finish: between
 *     prod.tail and prod.head, invisible to the consumer; such an mbuf is
 *     also in a held table;
 *   - in a held table (rx: the burst the process reads; tx: mbufs it is
 *     filling), entries m[0..n).
 * The process fills a held table by dequeuing straight into it (the ring
 * copies the pointers into shared memory), then stores n, then finishes
 * the dequeue: between the last two, an mbuf is both in the table and in
 * the ring's unfinished region, and recovery counts it once (in the
 * ring). It empties a held table by starting an enqueue, storing in mark
 * the producer tail the enqueue will end at, finishing it, then storing
 * n = 0: between the finish and n = 0 the ring's producer tail equals
 * mark, and recovery leaves the table alone. See cdd_svc_recover.
 */
#ifndef CDD_SVC_CTL_H
#define CDD_SVC_CTL_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <rte_config.h>
#include <rte_ring.h>
#include <rte_ring_peek.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>

#define CDD_SVC_MAGIC 0x63646473u /* "cdds" */
#define CDD_SVC_VERSION 2u
#define CDD_SVC_NAMESIZE 32
#define CDD_SVC_MAX_LANES 128 /* RTE_MAX_LCORE: at most one lane per poll loop */
#define CDD_SVC_MAX_BURST 512 /* CDD_MAX_BURST */

/* mark: bit 63 set when valid, the ring in bits 32..39, the producer
 * tail in the low 32 bits. */
#define CDD_SVC_MARK_VALID (1ull << 63)
enum { CDD_SVC_RING_TX = 1, CDD_SVC_RING_RET = 2 };

struct cdd_svc_held {
	uint64_t mark;
	uint32_t n;
	uint32_t pad;
	struct rte_mbuf *m[CDD_SVC_MAX_BURST];
};

struct cdd_svc_ctl {
	/* Written by the daemon before the memzone is looked up. */
	uint32_t magic, version;
	uint16_t nlanes, burst;
	uint32_t data_room; /* bytes an mbuf holds after its headroom */
	uint64_t daemon;    /* the daemon's pid | (start time & 0xffffffff) << 32 */
	char pool[CDD_SVC_NAMESIZE];
	char txname[CDD_SVC_NAMESIZE], retname[CDD_SVC_NAMESIZE], bufname[CDD_SVC_NAMESIZE];
	char lanes[CDD_SVC_MAX_LANES][CDD_SVC_NAMESIZE];

	/* The session. owner: 0 when free; a process claims it with a
	 * compare-and-swap of its pid | (start time & 0xffffffff) << 32,
	 * and only the daemon frees it after recovery, or the process when
	 * it detaches with nothing held. */
	uint64_t owner __rte_cache_aligned;
	uint64_t heartbeat; /* bumped by the process on every call */
	/* Sessions claimed so far, and the last claimant, written by the
	 * process after its claim: the daemon checks sessions periodically
	 * and learns from these of one that began and ended in between. */
	uint64_t claims, last_owner;
	uint32_t closing;   /* daemon stopping: drain, give back, detach */
	uint32_t recover;   /* owner gone: the serving loop recovers, then 0 */
	uint64_t rx_pkts, rx_bytes, tx_pkts, fwd_pkts; /* the process's counts */

	struct cdd_svc_held rx __rte_cache_aligned;
	struct cdd_svc_held tx __rte_cache_aligned;
};

/* ---- process side (package service) ---- */

/* cdd_svc_release empties a held table into ring r (ring id id), all or
 * nothing: 0 if empty, n moved, or -ENOBUFS when r lacks room. */
static inline int cdd_svc_release(struct cdd_svc_held *h, struct rte_ring *r, uint32_t id)
{
	uint32_t n = h->n;
	if (n == 0)
		return 0;
	if (rte_ring_enqueue_bulk_start(r, n, NULL) == 0)
		return -ENOBUFS;
	uint32_t end = r->prod.tail + n; /* we are r's only producer */
	__atomic_store_n(&h->mark, CDD_SVC_MARK_VALID | (uint64_t)id << 32 | end, __ATOMIC_RELEASE);
	rte_ring_enqueue_finish(r, (void *const *)h->m, n);
	__atomic_store_n(&h->n, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&h->mark, 0, __ATOMIC_RELEASE);
	return (int)n;
}

/* cdd_svc_take dequeues up to max mbufs from r into h (empty or not),
 * returning how many. */
static inline unsigned int cdd_svc_take(struct cdd_svc_held *h, struct rte_ring *r, unsigned int max)
{
	uint32_t have = h->n;
	if (have >= max)
		return 0;
	unsigned int k = rte_ring_dequeue_burst_start(r, (void **)&h->m[have], max - have, NULL);
	if (k == 0)
		return 0;
	__atomic_store_n(&h->n, have + k, __ATOMIC_RELEASE);
	rte_ring_dequeue_finish(r, k);
	return k;
}

/* ---- daemon side (consumer.Process) ---- */

/* cdd_svc_in_open_dequeue reports whether m lies in r's unfinished
 * dequeue, between cons.tail and cons.head. */
static inline int cdd_svc_in_open_dequeue(const struct rte_ring *r, const struct rte_mbuf *m)
{
	void *const *slots = (void *const *)&r[1];
	for (uint32_t p = r->cons.tail; p != r->cons.head; p++)
		if (slots[p & r->mask] == m)
			return 1;
	return 0;
}

/* cdd_svc_ring_free frees every mbuf in r (the caller is its consumer). */
static inline unsigned int cdd_svc_ring_free(struct rte_ring *r)
{
	void *objs[64];
	unsigned int total = 0, n;
	while ((n = rte_ring_sc_dequeue_burst(r, objs, 64, NULL)) > 0) {
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
		total += n;
	}
	return total;
}

/* What recovery found and freed. */
struct cdd_svc_recovery {
	uint64_t held;    /* in the process's held tables */
	uint64_t unacked; /* in dequeues it had begun (back in their rings) */
	uint64_t rings;   /* in the service's rings, lanes included */
};

/* cdd_svc_recover frees everything a gone process left: what it held,
 * what it was moving, and what is left in the service's rings. The
 * caller is the only one touching the daemon's side of the rings (the
 * serving loop, or teardown once the loops stopped); the lanes' producers
 * may keep enqueuing. It frees the session last. */
static inline void cdd_svc_recover(struct cdd_svc_ctl *c, struct rte_ring **lanes, uint16_t nlanes,
				   struct rte_ring *tx, struct rte_ring *ret, struct rte_ring *buf,
				   struct cdd_svc_recovery *out)
{
	memset(out, 0, sizeof(*out));
	/* An enqueue begun and not finished: invisible to us, its mbufs are
	 * still in a held table. Undo it. */
	tx->prod.head = tx->prod.tail;
	ret->prod.head = ret->prod.tail;
	/* Held tables, before the open dequeues are undone: an mbuf in both
	 * a table and an open dequeue is the ring's. */
	struct cdd_svc_held *tables[2] = {&c->rx, &c->tx};
	for (int t = 0; t < 2; t++) {
		struct cdd_svc_held *h = tables[t];
		uint32_t n = __atomic_load_n(&h->n, __ATOMIC_ACQUIRE);
		uint64_t mark = __atomic_load_n(&h->mark, __ATOMIC_ACQUIRE);
		if (n > CDD_SVC_MAX_BURST)
			n = 0; /* cannot happen: the process bounds it */
		if (n > 0 && (mark & CDD_SVC_MARK_VALID)) {
			struct rte_ring *r = ((mark >> 32) & 0xff) == CDD_SVC_RING_TX ? tx : ret;
			if (r->prod.tail == (uint32_t)mark)
				n = 0; /* the enqueue finished: the ring has them */
		}
		for (uint32_t i = 0; i < n; i++) {
			struct rte_mbuf *m = h->m[i];
			int open = cdd_svc_in_open_dequeue(buf, m);
			for (uint16_t l = 0; l < nlanes && !open; l++)
				open = cdd_svc_in_open_dequeue(lanes[l], m);
			if (!open) {
				rte_pktmbuf_free(m);
				out->held++;
			}
		}
		h->n = 0;
		h->mark = 0;
	}
	/* Dequeues begun and not finished: the mbufs are still in the ring. */
	for (uint16_t l = 0; l < nlanes; l++) {
		out->unacked += lanes[l]->cons.head - lanes[l]->cons.tail;
		lanes[l]->cons.head = lanes[l]->cons.tail;
	}
	out->unacked += buf->cons.head - buf->cons.tail;
	buf->cons.head = buf->cons.tail;
	for (uint16_t l = 0; l < nlanes; l++)
		out->rings += cdd_svc_ring_free(lanes[l]);
	out->rings += cdd_svc_ring_free(buf);
	out->rings += cdd_svc_ring_free(ret);
	out->rings += cdd_svc_ring_free(tx);
	__atomic_store_n(&c->owner, 0, __ATOMIC_RELEASE);
}

/* cdd_svc_held_now counts what a live process holds now, for the
 * report at stop: its tables and its open dequeues. */
static inline uint64_t cdd_svc_held_now(const struct cdd_svc_ctl *c)
{
	return __atomic_load_n(&c->rx.n, __ATOMIC_ACQUIRE) + __atomic_load_n(&c->tx.n, __ATOMIC_ACQUIRE);
}

#endif
