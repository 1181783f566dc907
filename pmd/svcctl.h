/* The shared-memory contract between cephdpdkd (the DPDK primary) and a
 * service process attached to one of its services (a DPDK secondary):
 * the control block in the memzone "cdds.<service>", the rings it names,
 * and both sides' steps on them (svcctl.c; the process side in
 * svcproc.c, the daemon side in svcdaemon.c). Package service (the
 * process side) and consumer.Process (the daemon side) reach them through
 * package pmd; the protocol lives only here.
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
#ifndef CDD_SVCCTL_H
#define CDD_SVCCTL_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <rte_config.h>
#include <rte_ring.h>
#include <rte_ring_peek.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include "lane.h" /* struct cdd_native: the daemon side runs as one */

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

/* What recovery found and freed. */
struct cdd_svc_recovery {
	uint64_t held;    /* in the process's held tables */
	uint64_t unacked; /* in dequeues it had begun (back in their rings) */
	uint64_t rings;   /* in the service's rings, lanes included */
};

/* The daemon's side of a service process (svcdaemon.c), run by the poll loop
 * that owns the service. */
struct cdd_svc_daemon {
	struct cdd_svc_ctl *c;
	struct rte_ring *tx, *ret, *buf;
	struct rte_mempool *mp;
	uint16_t nlanes, burst, port, queue, npend;
	uint32_t grant; /* fresh mbufs kept in buf while a process is attached */
	uint64_t tx_pkts, tx_bytes, returned, granted;
	uint64_t recoveries;
	struct cdd_svc_recovery last, total;
	struct rte_ring *lanes[CDD_SVC_MAX_LANES];
	struct rte_mbuf *pend[CDD_SVC_MAX_BURST];
};

/* A session's process-local state: the rings looked up by name (a ring's
 * address is the same in every process) and, for Go to read frames
 * without a cgo call each, the received burst's data pointers and
 * lengths. */
struct cdd_svc_proc {
	struct cdd_svc_ctl *c;
	struct rte_ring *tx, *ret, *buf;
	uint16_t nlanes, next;
	struct rte_ring *lanes[CDD_SVC_MAX_LANES];
	uint64_t bytes;
	void *data[CDD_SVC_MAX_BURST];
	uint16_t len[CDD_SVC_MAX_BURST];
	uint32_t pkt_len[CDD_SVC_MAX_BURST];
};

enum { CDD_SVC_OK, CDD_SVC_NO_ZONE, CDD_SVC_NOT_READY, CDD_SVC_VERSION_MISMATCH, CDD_SVC_NO_RING, CDD_SVC_NO_POOL };

/* svcctl.c: both sides' steps on the shared memory. */
int cdd_svc_release(struct cdd_svc_held *h, struct rte_ring *r, uint32_t id);
unsigned int cdd_svc_take(struct cdd_svc_held *h, struct rte_ring *r, unsigned int max);
unsigned int cdd_svc_ring_free(struct rte_ring *r);
void cdd_svc_recover(struct cdd_svc_ctl *c, struct rte_ring **lanes, uint16_t nlanes,
		     struct rte_ring *tx, struct rte_ring *ret, struct rte_ring *buf,
		     struct cdd_svc_recovery *out);
uint64_t cdd_svc_held_now(const struct cdd_svc_ctl *c);
uint64_t cdd_svc_load64(uint64_t *p);
uint32_t cdd_svc_load32(uint32_t *p);
void cdd_svc_store32(uint32_t *p, uint32_t v);

/* svcdaemon.c: the daemon's side. */
void cdd_svc_daemon_recover(struct cdd_svc_daemon *d);
void cdd_svc_daemon_init(struct cdd_native *n, struct cdd_svc_daemon *d);
const struct rte_memzone *cdd_svc_reserve(const char *name, int *err);
struct cdd_svc_ctl *cdd_svc_mz_ctl(const struct rte_memzone *mz);
void cdd_svc_release_pending(struct cdd_svc_daemon *d);

/* svcproc.c: the process's side. */
int cdd_svc_lookup(const char *zone, struct cdd_svc_proc *p, const char **missing);
int cdd_svc_claim(struct cdd_svc_ctl *c, uint64_t owner, uint64_t *holder);
int cdd_svc_recv(struct cdd_svc_proc *p, unsigned int max);
int cdd_svc_give_back(struct cdd_svc_proc *p);
int cdd_svc_forward(struct cdd_svc_proc *p);
int cdd_svc_send(struct cdd_svc_proc *p, const uint8_t *buf, const uint16_t *lens, unsigned int n);
int cdd_svc_detach(struct cdd_svc_proc *p, uint64_t owner);
uint32_t cdd_svc_closing(struct cdd_svc_ctl *c);

#endif
