/* The data path above a port (lane.h): ring sets, native consumers,
 * the dispatch of a classified burst to its lanes, and cdd_step, the poll
 * loop's one cgo call per RX queue and iteration, with the RX burst it
 * ends with. One translation unit, so that the compiler inlines the
 * step's parts into it. */
#include <rte_prefetch.h>
#include "lane.h"

/* cdd_burst_fill records what Go reads of the first n packets of b->pkts
 * (data pointer, lengths) and makes them the burst's contents. */
void cdd_burst_fill(struct cdd_burst *b, uint16_t n)
{
	uint64_t bytes = 0;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = b->pkts[i];
		void *data = rte_pktmbuf_mtod(m, void *);
		/* The classifier reads the headers next, from Go. */
		rte_prefetch0(data);
		b->frame[i] = (struct cdd_frame){data, m->data_len, m->data_len};
		b->pkt_len[i] = m->pkt_len;
		bytes += m->pkt_len;
	}
	b->n = n;
	b->bytes = bytes;
}

uint16_t cdd_rx_burst(struct cdd_burst *b, uint16_t port, uint16_t queue)
{
	uint16_t n = rte_eth_rx_burst(port, queue, b->pkts, b->cap);
	cdd_burst_fill(b, n);
	return n;
}

/* Frees every packet in the burst (used when nothing claims it). */
void cdd_burst_free(struct cdd_burst *b)
{
	rte_pktmbuf_free_bulk(b->pkts, b->n);
	b->n = 0;
}

/* cdd_ringset_dequeue takes up to max mbufs from the set's rings. */
unsigned int cdd_ringset_dequeue(struct cdd_ringset *s, struct rte_mbuf **m, unsigned int max)
{
	unsigned int got = 0;
	uint16_t first = s->next;
	for (uint16_t k = 0; k < s->n && got < max; k++) {
		uint16_t i = first + k;
		if (i >= s->n)
			i -= s->n;
		got += rte_ring_sc_dequeue_burst(s->r[i], (void **)&m[got], max - got, NULL);
	}
	if (++s->next >= s->n)
		s->next = 0;
	return got;
}

/* cdd_ringset_empty reports whether the set's rings are all empty. A
 * local consumer polls its lane on every turn of its loop, and the
 * dispatcher hands it most bursts directly, so its lane is mostly empty:
 * this check costs a poll of an empty lane less than a dequeue does. */
static inline int cdd_ringset_empty(const struct cdd_ringset *s)
{
	for (uint16_t i = 0; i < s->n; i++)
		if (!rte_ring_empty(s->r[i]))
			return 0;
	return 1;
}

static inline unsigned int cdd_native_sink(struct cdd_native *c)
{
	if (cdd_ringset_empty(c->lanes))
		return 0;
	struct rte_mbuf *m[CDD_MAX_BURST];
	unsigned int n = cdd_ringset_dequeue(c->lanes, m, c->burst);
	uint64_t bytes = 0;
	for (unsigned int i = 0; i < n; i++)
		bytes += m[i]->pkt_len;
	rte_pktmbuf_free_bulk(m, n);
	c->pkts += n;
	c->bytes += bytes;
	return n;
}

/* A forwarder keeps what the TX queue did not take and offers it again
 * before dequeuing more, so a busy port back-pressures the ring instead
 * of losing packets here. */
static inline unsigned int cdd_native_forward(struct cdd_native *c)
{
	if (c->npend == 0 && cdd_ringset_empty(c->lanes))
		return 0;
	if (c->npend < c->burst)
		c->npend += cdd_ringset_dequeue(c->lanes, &c->pend[c->npend], c->burst - c->npend);
	if (c->npend == 0)
		return 0;
	uint16_t sent = cdd_tx_pending(c->port, c->queue, c->pend, c->npend, &c->pkts, &c->bytes);
	c->npend -= sent;
	return sent;
}

/* cdd_native_offer hands a local consumer n packets of its lane straight
 * from the dispatcher, skipping the lane's ring, when nothing waits
 * before them (its ring empty, nothing pending): bytes is their total
 * length. It returns how many the consumer took, a prefix of m; the
 * dispatcher enqueues the rest into the ring, where the consumer finds
 * them next, in order. */
static inline unsigned int cdd_native_offer(struct cdd_native *c, struct rte_mbuf **m, unsigned int n, uint64_t bytes)
{
	switch (c->kind) {
	case CDD_NATIVE_SINK:
		rte_pktmbuf_free_bulk(m, n);
		c->pkts += n;
		c->bytes += bytes;
		return n;
	case CDD_NATIVE_FORWARD: {
		uint16_t sent = rte_eth_tx_burst(c->port, c->queue, m, (uint16_t)n);
		if (sent < n) /* rare: the queue is full; count what went */
			for (unsigned int i = sent; i < n; i++)
				bytes -= m[i]->pkt_len;
		c->pkts += sent;
		c->bytes += bytes;
		return sent;
	}
	}
	return 0;
}

/* cdd_native_idle reports whether a consumer holds nothing: packets
 * offered to it now would be the next in order. */
static inline int cdd_native_idle(struct cdd_native *c)
{
	return c->npend == 0;
}

unsigned int cdd_native_run(struct cdd_native *c)
{
	switch (c->kind) {
	case CDD_NATIVE_SINK:
		return cdd_native_sink(c);
	case CDD_NATIVE_FORWARD:
		return cdd_native_forward(c);
	case CDD_NATIVE_FUNC:
		return c->fn(c->arg);
	}
	return 0;
}

/* Frees what the consumer holds (forward: pending packets), counting
 * them as drops. */
unsigned int cdd_native_release(struct cdd_native *c)
{
	unsigned int n = c->npend;
	rte_pktmbuf_free_bulk(c->pend, c->npend);
	c->npend = 0;
	c->drops += n;
	return n;
}

/* cdd_dispatch hands each packet of the burst to its service's lane: one
 * pass to sort into per-service buckets, then per service present either
 * one enqueue burst into the lane's ring or, when the lane has a local
 * native consumer with nothing waiting (ring empty, nothing pending), the
 * bucket straight to that consumer, which saves the ring's enqueue and
 * dequeue and a second pass over the mbufs; what it does not take (a full
 * TX queue) goes into the ring, behind nothing. What a full ring refuses
 * is freed and counted as a drop. The burst is empty afterwards. */
static void cdd_dispatch(struct cdd_burst *b, struct cdd_loop *l)
{
	/* Fill counts and byte sums live in locals, set up for a service when
	 * its first packet shows up: the compiler keeps them out of the
	 * loop's C state, which the bucket stores could alias. */
	const uint16_t nr = l->nrings, cap = l->cap, n = b->n;
	void **bucket = l->bucket;
	uint16_t fill[CDD_MAX_SERVICES];
	uint64_t bytes[CDD_MAX_SERVICES];
	uint64_t present = 0;
	for (uint16_t i = 0; i < n; i++) {
		uint8_t s = b->svc[i];
		if (unlikely(s >= nr)) {
			/* Cannot happen with a validated classifier; never leak. */
			rte_pktmbuf_free(b->pkts[i]);
			continue;
		}
		uint64_t bit = 1ull << s;
		if (!(present & bit)) {
			present |= bit;
			fill[s] = 0;
			bytes[s] = 0;
		}
		bucket[(uint32_t)s * cap + fill[s]++] = b->pkts[i];
		bytes[s] += b->pkt_len[i];
	}
	/* The deltas of absent services stay as Go zeroed them. */
	while (present) {
		uint16_t s = __builtin_ctzll(present);
		present &= present - 1;
		void **out = &bucket[(uint32_t)s * cap];
		uint16_t k = fill[s];
		if (unlikely(l->rings[s] == NULL)) {
			/* A closed service (being replaced by a reload): freed
			 * and counted as drops. */
			rte_pktmbuf_free_bulk((struct rte_mbuf **)out, k);
			l->d[s].drops = k;
			continue;
		}
		unsigned int taken = 0;
		struct cdd_native *c = l->direct[s];
		if (c && cdd_native_idle(c) && rte_ring_empty(l->rings[s]))
			taken = cdd_native_offer(c, (struct rte_mbuf **)out, k, bytes[s]);
		unsigned int sent = taken;
		if (taken < k)
			sent += rte_ring_sp_enqueue_burst(l->rings[s], &out[taken], k - taken, NULL);
		if (sent < k) {
			for (unsigned int i = sent; i < k; i++)
				bytes[s] -= ((struct rte_mbuf *)out[i])->pkt_len;
			rte_pktmbuf_free_bulk((struct rte_mbuf **)&out[sent], k - sent);
		}
		l->d[s].pkts = sent;
		l->d[s].bytes = bytes[s];
		l->d[s].drops = k - sent;
	}
	b->n = 0;
}

/* cdd_step is a poll loop's one cgo call per RX queue and iteration: it
 * dispatches the burst Go has just classified, runs the native consumers
 * (when run_natives), and receives the next burst into b (when rx). It
 * returns the packets the natives handled. The burst and the loop state
 * come as integers: both are C memory, and cgo's check that a pointer
 * argument holds no Go pointer took 1.5% of a forwarding loop. */
uint32_t cdd_step(uintptr_t burst, uintptr_t loop, uint16_t port, uint16_t queue,
			 int run_natives, int rx)
{
	struct cdd_burst *b = (struct cdd_burst *)burst;
	struct cdd_loop *l = (struct cdd_loop *)loop;
	uint32_t work = 0;
	if (b && b->n)
		cdd_dispatch(b, l);
	if (run_natives)
		for (uint16_t i = 0; i < l->nnatives; i++)
			work += cdd_native_run(l->natives[i]);
	if (b && rx)
		cdd_rx_burst(b, port, queue);
	return work;
}

/* cdd_ringset_burst frees what b still holds and fills it from a ring
 * set, as cdd_rx_burst fills it from a port queue: one call a burst. */
uint16_t cdd_ringset_burst(struct cdd_burst *b, struct cdd_ringset *s, uint16_t max)
{
	if (b->n > 0)
		cdd_burst_free(b);
	if (max > b->cap)
		max = b->cap;
	uint16_t n = (uint16_t)cdd_ringset_dequeue(s, b->pkts, max);
	cdd_burst_fill(b, n);
	return n;
}

/* cdd_ring_free_all empties a ring, freeing every mbuf in it. */
unsigned int cdd_ring_free_all(struct rte_ring *r)
{
	void *objs[64];
	unsigned int total = 0, n;
	while ((n = rte_ring_dequeue_burst(r, objs, 64, NULL)) > 0) {
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
		total += n;
	}
	return total;
}
