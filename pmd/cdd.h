/* Declarations shared by package pmd's C: bursts (lane.c), copies to TX
 * (tx.c), the EAL (eal.c) and ports (port.c). */
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
#include <rte_memzone.h>
#include <rte_malloc.h>
#include <rte_ring.h>

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

/* lane.c */
void cdd_burst_fill(struct cdd_burst *b, uint16_t n);
uint16_t cdd_rx_burst(struct cdd_burst *b, uint16_t port, uint16_t queue);
void cdd_burst_free(struct cdd_burst *b);

/* tx.c */
uint16_t cdd_tx_copy(uint16_t port, uint16_t queue, struct rte_mempool *mp,
		     const uint8_t *buf, const uint16_t *lens, uint16_t n);
uint16_t cdd_tx_chain(uint16_t port, uint16_t queue, struct rte_mempool *mp,
		      const uint8_t *buf, const uint16_t *lens, uint16_t n);

/* eal.c */
int cdd_eal_init(int argc, char **argv, int *err);
int cdd_pdump_init(int *err);
int cdd_lcore_launch(unsigned int lcore);

/* port.c */
int cdd_port_setup(uint16_t port, uint16_t nrxq, uint16_t ntxq, uint16_t nrxd, uint16_t ntxd,
		   uint16_t mtu, struct rte_mempool *mp, const char **what);
int cdd_queue_stats(uint16_t port, struct rte_eth_stats *st);
int cdd_tap_set_tx_mtu(uint16_t port, uint16_t mtu, const char **what);
void cdd_port_tx_flush(uint16_t port, uint16_t queue);

/* cdd_tx_pending offers the n packets of pend to port's TX queue,
 * moves what it refuses to the front of pend, adds what went out to
 * *pkts and *bytes, and returns how many went: the forwarder's, the
 * kernel path's and a service process's transmit. Lengths are added up
 * before TX: once sent, an mbuf belongs to the PMD, which may free it at
 * once. What stays with us is subtracted. */
static inline uint16_t cdd_tx_pending(uint16_t port, uint16_t queue, struct rte_mbuf **pend, uint16_t n,
				      uint64_t *pkts, uint64_t *bytes)
{
	uint64_t b = 0;
	for (uint16_t i = 0; i < n; i++)
		b += pend[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(port, queue, pend, n);
	for (uint16_t i = sent; i < n; i++)
		b -= pend[i]->pkt_len;
	*pkts += sent;
	*bytes += b;
	if (sent > 0 && sent < n)
		memmove(&pend[0], &pend[sent], (n - sent) * sizeof(pend[0]));
	return sent;
}

#endif
