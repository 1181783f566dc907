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
