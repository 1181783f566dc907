/* A service process's side of its session (svcctl.h). */
#include "svcctl.h"

/* cdd_svc_lookup finds the control block and everything it names. On
 * CDD_SVC_NO_RING or CDD_SVC_NO_POOL, *missing is the name. */
int cdd_svc_lookup(const char *zone, struct cdd_svc_proc *p, const char **missing)
{
	const struct rte_memzone *mz = rte_memzone_lookup(zone);
	if (mz == NULL)
		return CDD_SVC_NO_ZONE;
	struct cdd_svc_ctl *c = mz->addr;
	if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != CDD_SVC_MAGIC)
		return CDD_SVC_NOT_READY;
	if (c->version != CDD_SVC_VERSION)
		return CDD_SVC_VERSION_MISMATCH;
	p->c = c;
	if (rte_mempool_lookup(c->pool) == NULL) {
		*missing = c->pool;
		return CDD_SVC_NO_POOL;
	}
	struct rte_ring **rings[3] = {&p->tx, &p->ret, &p->buf};
	const char *names[3] = {c->txname, c->retname, c->bufname};
	for (int i = 0; i < 3; i++)
		if ((*rings[i] = rte_ring_lookup(names[i])) == NULL) {
			*missing = names[i];
			return CDD_SVC_NO_RING;
		}
	p->nlanes = c->nlanes;
	for (uint16_t i = 0; i < c->nlanes; i++)
		if ((p->lanes[i] = rte_ring_lookup(c->lanes[i])) == NULL) {
			*missing = c->lanes[i];
			return CDD_SVC_NO_RING;
		}
	return CDD_SVC_OK;
}

int cdd_svc_claim(struct cdd_svc_ctl *c, uint64_t owner, uint64_t *holder)
{
	uint64_t exp = 0;
	if (__atomic_compare_exchange_n(&c->owner, &exp, owner, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&c->last_owner, owner, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->claims, 1, __ATOMIC_RELEASE);
		return 0;
	}
	*holder = exp;
	return -EBUSY;
}

/* cdd_svc_recv gives back the burst held (to ret), then takes up to max
 * from the lanes, in turn, starting one lane further each call. It
 * returns the count, -ENOBUFS when ret has no room yet, or -ESHUTDOWN
 * when the daemon stops and nothing is left. */
int cdd_svc_recv(struct cdd_svc_proc *p, unsigned int max)
{
	struct cdd_svc_ctl *c = p->c;
	struct cdd_svc_held *h = &c->rx;
	c->heartbeat++;
	int r = cdd_svc_release(h, p->ret, CDD_SVC_RING_RET);
	if (r < 0)
		return r;
	if (max > c->burst)
		max = c->burst;
	for (uint16_t k = 0; k < p->nlanes && h->n < max; k++) {
		uint16_t i = p->next + k;
		if (i >= p->nlanes)
			i -= p->nlanes;
		cdd_svc_take(h, p->lanes[i], max);
	}
	if (++p->next >= p->nlanes)
		p->next = 0;
	uint32_t n = h->n;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = h->m[i];
		p->data[i] = rte_pktmbuf_mtod(m, void *);
		p->len[i] = m->data_len;
		p->pkt_len[i] = m->pkt_len;
		bytes += m->pkt_len;
	}
	p->bytes = bytes;
	c->rx_pkts += n;
	c->rx_bytes += bytes;
	if (n == 0 && __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE))
		return -ESHUTDOWN;
	return (int)n;
}

/* cdd_svc_give_back returns the burst held to the daemon. */
int cdd_svc_give_back(struct cdd_svc_proc *p)
{
	p->c->heartbeat++;
	return cdd_svc_release(&p->c->rx, p->ret, CDD_SVC_RING_RET);
}

/* cdd_svc_forward sends the burst held out the port, all or nothing. */
int cdd_svc_forward(struct cdd_svc_proc *p)
{
	struct cdd_svc_ctl *c = p->c;
	c->heartbeat++;
	int r = cdd_svc_release(&c->rx, p->tx, CDD_SVC_RING_TX);
	if (r > 0)
		c->fwd_pkts += (uint64_t)r;
	return r;
}

/* cdd_svc_send copies n frames packed back to back in buf (Go memory
 * without pointers) into fresh mbufs from buf and puts them on tx. It
 * takes no more than tx has room for, and we are tx's only producer, so
 * the release cannot fail. Returns frames sent. */
int cdd_svc_send(struct cdd_svc_proc *p, const uint8_t *buf, const uint16_t *lens, unsigned int n)
{
	struct cdd_svc_ctl *c = p->c;
	struct cdd_svc_held *h = &c->tx;
	c->heartbeat++;
	unsigned int room = rte_ring_free_count(p->tx);
	if (n > room)
		n = room;
	if (n > CDD_SVC_MAX_BURST)
		n = CDD_SVC_MAX_BURST;
	unsigned int got = cdd_svc_take(h, p->buf, n);
	for (unsigned int i = 0; i < got; i++) {
		struct rte_mbuf *m = h->m[i];
		rte_pktmbuf_reset(m);
		memcpy(rte_pktmbuf_mtod(m, void *), buf, lens[i]);
		m->data_len = lens[i];
		m->pkt_len = lens[i];
		buf += lens[i];
	}
	if (got > 0)
		cdd_svc_release(h, p->tx, CDD_SVC_RING_TX);
	c->tx_pkts += got;
	return (int)got;
}

/* cdd_svc_detach gives back what the session holds and frees it. */
int cdd_svc_detach(struct cdd_svc_proc *p, uint64_t owner)
{
	struct cdd_svc_ctl *c = p->c;
	int r = cdd_svc_release(&c->rx, p->ret, CDD_SVC_RING_RET);
	if (r < 0)
		return r;
	uint64_t exp = owner;
	if (!__atomic_compare_exchange_n(&c->owner, &exp, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return -EPERM;
	return 0;
}

uint32_t cdd_svc_closing(struct cdd_svc_ctl *c) { return __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE); }
