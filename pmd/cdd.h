/* C helpers for package pmd. Kept tiny: one call per burst. */
#ifndef CDD_PMD_H
#define CDD_PMD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <rte_config.h>
#include <rte_errno.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_malloc.h>
#include <rte_ring.h>
#include <rte_prefetch.h>

#define CDD_MAX_BURST 512

/* A packet's first segment as Go sees a []byte: data pointer, length and
 * capacity, so that Go ranges over a burst's frames as a [][]byte with
 * nothing to build per packet (burst_cgo.go checks the layout). */
struct cdd_frame {
	void *data;
	int64_t len;
	int64_t cap;
};

/* A burst of received packets plus what Go needs to read them without
 * calling back into C: each packet's first segment, packet length, and a
 * slot for the classifier's verdict. */
struct cdd_burst {
	uint16_t n;
	uint16_t cap;
	uint64_t bytes;
	struct rte_mbuf *pkts[CDD_MAX_BURST];
	struct cdd_frame frame[CDD_MAX_BURST];
	uint32_t pkt_len[CDD_MAX_BURST];
	uint8_t svc[CDD_MAX_BURST];
};

/* cdd_burst_fill records what Go reads of the first n packets of b->pkts
 * (data pointer, lengths) and makes them the burst's contents. */
static inline void cdd_burst_fill(struct cdd_burst *b, uint16_t n)
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

static inline uint16_t cdd_rx_burst(struct cdd_burst *b, uint16_t port, uint16_t queue)
{
	uint16_t n = rte_eth_rx_burst(port, queue, b->pkts, b->cap);
	cdd_burst_fill(b, n);
	return n;
}

/* Frees every packet in the burst (used when nothing claims it). */
static inline void cdd_burst_free(struct cdd_burst *b)
{
	rte_pktmbuf_free_bulk(b->pkts, b->n);
	b->n = 0;
}

/* Transmits n frames packed back to back in buf (Go memory without
 * pointers, so cgo may pass it): allocates mbufs in bulk, copies, sends,
 * and frees what the queue did not take. Returns frames sent. */
static inline uint16_t cdd_tx_copy(uint16_t port, uint16_t queue, struct rte_mempool *mp,
				   const uint8_t *buf, const uint16_t *lens, uint16_t n)
{
	struct rte_mbuf *m[CDD_MAX_BURST];
	if (n > CDD_MAX_BURST)
		n = CDD_MAX_BURST;
	if (rte_pktmbuf_alloc_bulk(mp, m, n) != 0)
		return 0;
	for (uint16_t i = 0; i < n; i++) {
		char *dst = rte_pktmbuf_append(m[i], lens[i]);
		if (dst == NULL) {
			rte_pktmbuf_free_bulk(m, n);
			return 0;
		}
		memcpy(dst, buf, lens[i]);
		buf += lens[i];
	}
	uint16_t sent = rte_eth_tx_burst(port, queue, m, n);
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
	return sent;
}

/* Transmits one packet of n segments packed back to back in buf, each
 * copied into an mbuf of its own and chained, the way scattered RX
 * delivers a large frame. Returns 1 if the queue took it, else frees the
 * chain and returns 0. For tests. */
static inline uint16_t cdd_tx_chain(uint16_t port, uint16_t queue, struct rte_mempool *mp,
				    const uint8_t *buf, const uint16_t *lens, uint16_t n)
{
	struct rte_mbuf *head = NULL;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
		char *dst = m == NULL ? NULL : rte_pktmbuf_append(m, lens[i]);
		if (dst == NULL || (head != NULL && rte_pktmbuf_chain(head, m) != 0)) {
			rte_pktmbuf_free(m);
			rte_pktmbuf_free(head);
			return 0;
		}
		if (head == NULL)
			head = m;
		memcpy(dst, buf, lens[i]);
		buf += lens[i];
	}
	if (rte_eth_tx_burst(port, queue, &head, 1) == 1)
		return 1;
	rte_pktmbuf_free(head);
	return 0;
}

#endif
