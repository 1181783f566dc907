package pmd

/*
#include "cdd.h"
*/
import "C"

import (
	"fmt"
	"net"
	"unsafe"
)

// Port is an opened DPDK ethdev port.
type Port struct {
	id   uint16
	name string
}

// OpenPort finds the port DPDK created for a device given to the EAL, by its
// PCI address or vdev name (e.g. "net_af_packet0").
func OpenPort(name string) (*Port, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var id C.uint16_t
	if rc := C.rte_eth_dev_get_port_by_name(cname, &id); rc != 0 {
		return nil, fmt.Errorf("pmd: port %q: %w", name, ErrNoPort)
	}
	return &Port{id: uint16(id), name: name}, nil
}

// ID returns the DPDK port ID.
func (p *Port) ID() uint16 { return p.id }

// Name returns the device name the port was opened by.
func (p *Port) Name() string { return p.name }

// SetTapTxMTU lets a started net_tap port send the kernel frames of up to
// mtu: DPDK 22.11's net_tap drops longer ones on TX, and ethdev refuses it
// an MTU above 1504 (port.c, cdd_tap_set_tx_mtu). The kernel interface's
// own MTU is set through netlink.
func (p *Port) SetTapTxMTU(mtu uint16) error {
	var what *C.char
	if rc := C.cdd_tap_set_tx_mtu(C.uint16_t(p.id), C.uint16_t(mtu), &what); rc != 0 {
		return fmt.Errorf("pmd: port %d (%s): net_tap TX MTU %d: %s: %w", p.id, p.name, mtu, C.GoString(what), Errno(-rc))
	}
	return nil
}

// Configure sets up queues, descriptors, MTU and promiscuous mode; RX
// queues take their mbufs from pool. RSS is enabled when there is more
// than one RX queue.
func (p *Port) Configure(cfg PortConfig, pool *Mempool) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("pmd: configure port %d (%s): %w", p.id, p.name, err)
	}
	var what *C.char
	rc := C.cdd_port_setup(C.uint16_t(p.id), C.uint16_t(cfg.RxQueues), C.uint16_t(cfg.TxQueues),
		C.uint16_t(cfg.RxDescriptors), C.uint16_t(cfg.TxDescriptors), C.uint16_t(cfg.MTU),
		pool.c(), &what)
	if rc != 0 {
		return fmt.Errorf("pmd: configure port %d (%s): %s: %w", p.id, p.name, C.GoString(what), Errno(-rc))
	}
	if cfg.Promiscuous {
		// Virtual devices without the notion return ENOTSUP: not fatal.
		if rc := C.rte_eth_promiscuous_enable(C.uint16_t(p.id)); rc != 0 && rc != -C.ENOTSUP {
			return fmt.Errorf("pmd: port %d promiscuous: %w", p.id, Errno(-rc))
		}
	}
	return nil
}

// Start starts the port.
func (p *Port) Start() error {
	if rc := C.rte_eth_dev_start(C.uint16_t(p.id)); rc != 0 {
		return fmt.Errorf("pmd: start port %d (%s): %w", p.id, p.name, Errno(-rc))
	}
	return nil
}

// Stop stops the port; the driver releases the mbufs held by its RX rings.
func (p *Port) Stop() error {
	if rc := C.rte_eth_dev_stop(C.uint16_t(p.id)); rc != 0 {
		return fmt.Errorf("pmd: stop port %d (%s): %w", p.id, p.name, Errno(-rc))
	}
	return nil
}

// FlushTx offers an empty burst to TX queue q, for drivers that give sent
// mbufs back only on their next burst (net_af_xdp). Only the queue's
// owner may call it: at shutdown, after the poll loops have stopped.
func (p *Port) FlushTx(q uint16) { C.cdd_port_tx_flush(C.uint16_t(p.id), C.uint16_t(q)) }

// Close releases the port. It must be stopped.
func (p *Port) Close() error {
	if rc := C.rte_eth_dev_close(C.uint16_t(p.id)); rc != 0 {
		return fmt.Errorf("pmd: close port %d (%s): %w", p.id, p.name, Errno(-rc))
	}
	return nil
}

// Link returns the link state without waiting for negotiation.
func (p *Port) Link() (Link, error) {
	var l C.struct_rte_eth_link
	if rc := C.rte_eth_link_get_nowait(C.uint16_t(p.id), &l); rc != 0 {
		return Link{}, fmt.Errorf("pmd: link of port %d: %w", p.id, Errno(-rc))
	}
	// link_status etc. are bitfields, which cgo cannot name: decode the
	// packed 64-bit word (speed:32, duplex:1, autoneg:1, status:1).
	word := *(*uint64)(unsafe.Pointer(&l))
	return Link{
		SpeedMbps:  uint32(word),
		FullDuplex: word>>32&1 == 1,
		Up:         word>>34&1 == 1,
	}, nil
}

// Info describes the port.
func (p *Port) Info() (Info, error) {
	var di C.struct_rte_eth_dev_info
	if rc := C.rte_eth_dev_info_get(C.uint16_t(p.id), &di); rc != 0 {
		return Info{}, fmt.Errorf("pmd: info of port %d: %w", p.id, Errno(-rc))
	}
	var mac C.struct_rte_ether_addr
	if rc := C.rte_eth_macaddr_get(C.uint16_t(p.id), &mac); rc != 0 {
		return Info{}, fmt.Errorf("pmd: MAC of port %d: %w", p.id, Errno(-rc))
	}
	return Info{
		ID:       p.id,
		Name:     p.name,
		Driver:   C.GoString(di.driver_name),
		MAC:      net.HardwareAddr(C.GoBytes(unsafe.Pointer(&mac.addr_bytes[0]), 6)),
		MaxRxQ:   uint16(di.max_rx_queues),
		MaxTxQ:   uint16(di.max_tx_queues),
		SocketID: int(C.rte_eth_dev_socket_id(C.uint16_t(p.id))),
	}, nil
}

// Stats reads the basic counters, with per-queue figures for the first
// nq queues where the driver fills them in.
func (p *Port) Stats(nq int) (Stats, error) {
	var st C.struct_rte_eth_stats
	if rc := C.cdd_queue_stats(C.uint16_t(p.id), &st); rc != 0 {
		return Stats{}, fmt.Errorf("pmd: stats of port %d: %w", p.id, Errno(-rc))
	}
	s := Stats{
		RxPackets: uint64(st.ipackets), TxPackets: uint64(st.opackets),
		RxBytes: uint64(st.ibytes), TxBytes: uint64(st.obytes),
		RxMissed: uint64(st.imissed), RxErrors: uint64(st.ierrors),
		TxErrors: uint64(st.oerrors), RxNoMbuf: uint64(st.rx_nombuf),
	}
	nq = min(nq, C.RTE_ETHDEV_QUEUE_STAT_CNTRS)
	for q := 0; q < nq; q++ {
		s.Queues = append(s.Queues, QueueStats{
			RxPackets: uint64(st.q_ipackets[q]), TxPackets: uint64(st.q_opackets[q]),
			RxBytes: uint64(st.q_ibytes[q]), TxBytes: uint64(st.q_obytes[q]),
			RxErrors: uint64(st.q_errors[q]),
		})
	}
	return s, nil
}

// XStats reads the driver's extended statistics.
func (p *Port) XStats() ([]XStat, error) {
	n := C.rte_eth_xstats_get_names(C.uint16_t(p.id), nil, 0)
	if n < 0 {
		return nil, fmt.Errorf("pmd: xstats of port %d: %w", p.id, Errno(-n))
	}
	if n == 0 {
		return nil, nil
	}
	names := make([]C.struct_rte_eth_xstat_name, n)
	vals := make([]C.struct_rte_eth_xstat, n)
	if got := C.rte_eth_xstats_get_names(C.uint16_t(p.id), &names[0], C.uint(n)); got != n {
		return nil, fmt.Errorf("pmd: xstats names of port %d: got %d of %d", p.id, got, n)
	}
	if got := C.rte_eth_xstats_get(C.uint16_t(p.id), &vals[0], C.uint(n)); got != n {
		return nil, fmt.Errorf("pmd: xstats of port %d: got %d of %d", p.id, got, n)
	}
	out := make([]XStat, 0, n)
	for _, v := range vals {
		if int(v.id) < len(names) {
			out = append(out, XStat{Name: C.GoString(&names[v.id].name[0]), Value: uint64(v.value)})
		}
	}
	return out, nil
}
