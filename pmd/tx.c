/* Copies of Go frames to a TX queue. */
#include "cdd.h"

/* Transmits n frames packed back to back in buf (Go memory without
 * pointers, so cgo may pass it): allocates mbufs in bulk, copies, sends,
 * and frees what the queue did not take. Returns frames sent. */
uint16_t cdd_tx_copy(uint16_t port, uint16_t queue, struct rte_mempool *mp,
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
uint16_t cdd_tx_chain(uint16_t port, uint16_t queue, struct rte_mempool *mp,
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
