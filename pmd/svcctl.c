/* Steps on a service's shared memory that both sides take (svcctl.h). */
#include "svcctl.h"

/* cdd_svc_release empties a held table into ring r (ring id id), all or
 * nothing: 0 if empty, n moved, or -ENOBUFS when r lacks room. */
int cdd_svc_release(struct cdd_svc_held *h, struct rte_ring *r, uint32_t id)
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
unsigned int cdd_svc_take(struct cdd_svc_held *h, struct rte_ring *r, unsigned int max)
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
unsigned int cdd_svc_ring_free(struct rte_ring *r)
{
	return cdd_ring_free_all(r); /* single-consumer: the ring's own flags (pmd.NewRing) */
}

/* cdd_svc_recover frees everything a gone process left: what it held,
 * what it was moving, and what is left in the service's rings. The
 * caller is the only one touching the daemon's side of the rings (the
 * serving loop, or teardown once the loops stopped); the lanes' producers
 * may keep enqueuing. It frees the session last. */
void cdd_svc_recover(struct cdd_svc_ctl *c, struct rte_ring **lanes, uint16_t nlanes,
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
uint64_t cdd_svc_held_now(const struct cdd_svc_ctl *c)
{
	return __atomic_load_n(&c->rx.n, __ATOMIC_ACQUIRE) + __atomic_load_n(&c->tx.n, __ATOMIC_ACQUIRE);
}

/* Loads and stores of the control block's words, for Go. */
uint64_t cdd_svc_load64(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
uint32_t cdd_svc_load32(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void cdd_svc_store32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
