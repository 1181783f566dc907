/* Consumers implemented in C that a poll loop runs inside its one cgo call
 * per iteration (see cdd_step in loop_cgo.go). Package consumer creates
 * them; package dispatch runs them. Shared by both through this header. */
#ifndef CDD_NATIVE_H
#define CDD_NATIVE_H

#include <stdint.h>
#include <string.h>
#include <rte_config.h>
#include <rte_ring.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include "cdd.h" /* CDD_MAX_BURST */

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

/* cdd_ringset_dequeue takes up to max mbufs from the set's rings. */
static inline unsigned int cdd_ringset_dequeue(struct cdd_ringset *s, struct rte_mbuf **m, unsigned int max)
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

enum {
	CDD_NATIVE_SINK = 1,    /* count and free */
	CDD_NATIVE_FORWARD = 2, /* transmit out a port queue */
	CDD_NATIVE_FUNC = 3,    /* fn(arg): a consumer with state of its own (a service process's) */
};

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
	/* Add up lengths before TX: once sent, an mbuf belongs to the PMD,
	 * which may free it at once. Subtract what stays with us. */
	uint64_t bytes = 0;
	for (uint16_t i = 0; i < c->npend; i++)
		bytes += c->pend[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(c->port, c->queue, c->pend, c->npend);
	for (uint16_t i = sent; i < c->npend; i++)
		bytes -= c->pend[i]->pkt_len;
	c->pkts += sent;
	c->bytes += bytes;
	if (sent > 0 && sent < c->npend)
		memmove(&c->pend[0], &c->pend[sent], (c->npend - sent) * sizeof(c->pend[0]));
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

static inline unsigned int cdd_native_run(struct cdd_native *c)
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
static inline unsigned int cdd_native_release(struct cdd_native *c)
{
	unsigned int n = c->npend;
	rte_pktmbuf_free_bulk(c->pend, c->npend);
	c->npend = 0;
	c->drops += n;
	return n;
}

#endif
