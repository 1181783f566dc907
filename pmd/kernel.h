/* The kernel exception path's C state (kernel.c). */
#ifndef CDD_KERNEL_H
#define CDD_KERNEL_H

#include "lane.h"

#define CDD_KERNEL_MAX_SERVICES 64

struct cdd_kernel_svc {
	struct cdd_ringset *lanes;
	uint64_t pkts, bytes, drops;
};

/* The exception path's C state: the kernel services' lanes in drain
 * order (highest priority first), the kernel interface's DPDK port, the
 * NIC port and TX queue the kernel's frames leave on, and the frames
 * the NIC's TX queue has not taken yet. */
struct cdd_kernel {
	uint16_t nsvc;
	uint16_t ifport;
	uint16_t port, txq;
	uint16_t budget, burst;
	uint16_t npend;
	uint16_t rx_skip; /* polls left before reading the interface again */
	struct cdd_kernel_svc svc[CDD_KERNEL_MAX_SERVICES];
	uint64_t up_pkts, up_bytes, up_drops; /* kernel → port */
	struct rte_mbuf *pend[CDD_MAX_BURST];
};

unsigned int cdd_kernel_poll(struct cdd_kernel *k);
void cdd_kernel_release(struct cdd_kernel *k);

#endif
