/* Port setup: queues, RSS, MTU. */
#include "cdd.h"

int cdd_port_setup(uint16_t port, uint16_t nrxq, uint16_t ntxq, uint16_t nrxd, uint16_t ntxd,
		   uint16_t mtu, struct rte_mempool *mp, const char **what)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	int rc;

	memset(&conf, 0, sizeof(conf));
	*what = "dev_info_get";
	if ((rc = rte_eth_dev_info_get(port, &info)) != 0)
		return rc;
	if (nrxq > 1) {
		/* Spread flows over queues with whatever hash the device supports. */
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf =
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
	}
	if (mtu != 0)
		conf.rxmode.mtu = mtu;
	*what = "dev_configure";
	if ((rc = rte_eth_dev_configure(port, nrxq, ntxq, &conf)) != 0)
		return rc;
	*what = "adjust_nb_rx_tx_desc";
	if ((rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrxd, &ntxd)) != 0)
		return rc;
	int socket = rte_eth_dev_socket_id(port);
	if (socket < 0)
		socket = (int)rte_socket_id();
	*what = "rx_queue_setup";
	for (uint16_t q = 0; q < nrxq; q++)
		if ((rc = rte_eth_rx_queue_setup(port, q, nrxd, socket, NULL, mp)) != 0)
			return rc;
	*what = "tx_queue_setup";
	for (uint16_t q = 0; q < ntxq; q++)
		if ((rc = rte_eth_tx_queue_setup(port, q, ntxd, socket, NULL)) != 0)
			return rc;
	return 0;
}

int cdd_queue_stats(uint16_t port, struct rte_eth_stats *st)
{
	return rte_eth_stats_get(port, st);
}

/* An empty burst: drivers that free sent mbufs only on their next burst
 * (net_af_xdp pulls its completion ring then) give them back now. */
void cdd_port_tx_flush(uint16_t port, uint16_t queue)
{
	rte_eth_tx_burst(port, queue, NULL, 0);
}

/* The head of DPDK 22.11's net_tap TX queue (drivers/net/tap/rte_eth_tap.h,
 * struct tx_queue): its TX path reads the port's MTU through mtu. */
struct cdd_tap_txq_head {
	int type;
	uint16_t *mtu;
};

/* cdd_tap_set_tx_mtu sets the MTU net_tap's TX path holds frames to. DPDK
 * 22.11's net_tap stops a TX burst at the first frame longer than the
 * port's MTU + 22, yet reports a largest frame of 1522 bytes, so ethdev
 * refuses it a larger MTU: jumbo frames to the kernel would all be
 * dropped. Its TX queue points at the MTU in the port's ethdev data, which
 * this writes, once it has checked that the pointer lies in ethdev's
 * shared data and reads the port's MTU; rte_eth_dev_get_mtu then confirms
 * it was the port's. The port must be started: its TX queues are in
 * rte_eth_fp_ops from then on. */
int cdd_tap_set_tx_mtu(uint16_t port, uint16_t mtu, const char **what)
{
	const struct rte_memzone *mz = rte_memzone_lookup("rte_eth_dev_data");
	uint16_t cur, old;
	int rc;

	*what = "ethdev's shared data not found";
	if (mz == NULL || port >= RTE_MAX_ETHPORTS)
		return -ENOENT;
	*what = "get_mtu";
	if ((rc = rte_eth_dev_get_mtu(port, &cur)) != 0)
		return rc;
	*what = "no started TX queue 0";
	void **txqs = rte_eth_fp_ops[port].txq.data;
	if (txqs == NULL || txqs[0] == NULL)
		return -EINVAL;
	uint16_t *p = ((struct cdd_tap_txq_head *)txqs[0])->mtu;
	uintptr_t lo = (uintptr_t)mz->addr, hi = lo + mz->len, at = (uintptr_t)p;
	*what = "the TX queue's MTU is not the port's (not DPDK 22.11's net_tap?)";
	if (at < lo || at + sizeof(*p) > hi || at % sizeof(*p) != 0 || *p != cur)
		return -EINVAL;
	old = *p;
	*p = mtu;
	if (rte_eth_dev_get_mtu(port, &cur) != 0 || cur != mtu) {
		*p = old;
		return -EINVAL;
	}
	return 0;
}
