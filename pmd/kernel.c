/* The kernel exception path: the kernel services' lanes to the kernel
 * interface, in priority order, and the kernel's frames out the NIC. */
#include "kernel.h"

/* Polls to skip after an empty read of the interface. */
#define CDD_KERNEL_RX_SKIP 7

/* cdd_kernel_poll moves at most budget packets from the services' lanes
 * to the kernel, highest priority first, so that when the kernel side is
 * the bottleneck the lowest-priority ring is the one that fills and
 * drops at dispatch. Then it moves one burst the kernel sent out the
 * port, keeping what the TX queue refuses for the next call. */
unsigned int cdd_kernel_poll(struct cdd_kernel *k)
{
	struct rte_mbuf *m[CDD_MAX_BURST];
	unsigned int work = 0;
	uint16_t left = k->budget;
	for (uint16_t i = 0; i < k->nsvc && left > 0; i++) {
		struct cdd_kernel_svc *s = &k->svc[i];
		unsigned int n = cdd_ringset_dequeue(s->lanes, m, left);
		if (n == 0)
			continue;
		uint64_t bytes = 0;
		for (unsigned int j = 0; j < n; j++)
			bytes += m[j]->pkt_len;
		uint16_t sent = rte_eth_tx_burst(k->ifport, 0, m, n);
		for (unsigned int j = sent; j < n; j++)
			bytes -= m[j]->pkt_len;
		if (sent < n)
			rte_pktmbuf_free_bulk(&m[sent], n - sent);
		s->pkts += sent;
		s->bytes += bytes;
		s->drops += n - sent;
		left -= n;
		work += n;
	}

	/* Reading a tap is a system call even when the kernel sent nothing:
	 * after an empty read, skip a few polls (a few microseconds). */
	if (k->rx_skip > 0) {
		k->rx_skip--;
	} else if (k->npend < k->burst) {
		uint16_t n = rte_eth_rx_burst(k->ifport, 0, &k->pend[k->npend], k->burst - k->npend);
		k->npend += n;
		if (n == 0)
			k->rx_skip = CDD_KERNEL_RX_SKIP;
	}
	if (k->npend == 0)
		return work;
	uint16_t sent = cdd_tx_pending(k->port, k->txq, k->pend, k->npend, &k->up_pkts, &k->up_bytes);
	k->npend -= sent;
	return work + sent;
}

/* cdd_kernel_release frees the kernel's frames the port never took. */
void cdd_kernel_release(struct cdd_kernel *k)
{
	rte_pktmbuf_free_bulk(k->pend, k->npend);
	k->up_drops += k->npend;
	k->npend = 0;
}
