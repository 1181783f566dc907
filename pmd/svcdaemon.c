/* The daemon's side of a service process (svcctl.h), run by the poll
 * loop that owns the service. */
#include "svcctl.h"

void cdd_svc_daemon_recover(struct cdd_svc_daemon *d)
{
	cdd_svc_recover(d->c, d->lanes, d->nlanes, d->tx, d->ret, d->buf, &d->last);
	d->recoveries++;
	d->total.held += d->last.held;
	d->total.unacked += d->last.unacked;
	d->total.rings += d->last.rings;
}

/* cdd_svc_serve is one turn: recover a gone process if the supervisor
 * asks, free what the process gave back, transmit what it sent (keeping
 * what the TX queue refuses, as the forwarder does), and keep its supply
 * of fresh mbufs while it is attached. The lanes are the process's to
 * drain: while none is attached they fill, and the dispatcher counts
 * the drops. */
static unsigned int cdd_svc_serve(void *arg)
{
	struct cdd_svc_daemon *d = arg;
	struct cdd_svc_ctl *c = d->c;
	if (__atomic_load_n(&c->recover, __ATOMIC_ACQUIRE)) {
		cdd_svc_daemon_recover(d);
		__atomic_store_n(&c->recover, 0, __ATOMIC_RELEASE);
		return 1;
	}
	unsigned int work = 0;
	void *objs[CDD_SVC_MAX_BURST];
	unsigned int n = rte_ring_sc_dequeue_burst(d->ret, objs, d->burst, NULL);
	if (n > 0) {
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
		d->returned += n;
		work += n;
	}
	if (d->npend < d->burst)
		d->npend += rte_ring_sc_dequeue_burst(d->tx, (void **)&d->pend[d->npend], d->burst - d->npend, NULL);
	if (d->npend > 0) {
		uint16_t sent = cdd_tx_pending(d->port, d->queue, d->pend, d->npend, &d->tx_pkts, &d->tx_bytes);
		d->npend -= sent;
		work += sent;
	}
	if (__atomic_load_n(&c->owner, __ATOMIC_ACQUIRE) != 0 && !__atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) {
		unsigned int have = rte_ring_count(d->buf);
		if (have < d->grant / 2) {
			unsigned int k = d->grant - have;
			if (k > d->burst)
				k = d->burst;
			/* We are buf's only producer: the room is there. */
			if (rte_pktmbuf_alloc_bulk(d->mp, (struct rte_mbuf **)objs, k) == 0) {
				rte_ring_sp_enqueue_bulk(d->buf, objs, k, NULL);
				d->granted += k;
			}
		}
	}
	return work;
}

void cdd_svc_daemon_init(struct cdd_native *n, struct cdd_svc_daemon *d)
{
	n->fn = cdd_svc_serve;
	n->arg = d;
}

const struct rte_memzone *cdd_svc_reserve(const char *name, int *err)
{
	rte_errno = 0;
	const struct rte_memzone *mz = rte_memzone_reserve(name, sizeof(struct cdd_svc_ctl), SOCKET_ID_ANY, 0);
	*err = rte_errno;
	return mz;
}

struct cdd_svc_ctl *cdd_svc_mz_ctl(const struct rte_memzone *mz) { return mz->addr; }

void cdd_svc_release_pending(struct cdd_svc_daemon *d)
{
	rte_pktmbuf_free_bulk(d->pend, d->npend);
	d->npend = 0;
}
