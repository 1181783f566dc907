package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// vhostNet is the device virtio_user needs for a kernel interface.
const vhostNet = "/dev/vhost-net"

// kernelPath is the exception path: the kernel interface DPDK created,
// its port, and the consumer that moves packets both ways.
type kernelPath struct {
	devargs  string
	port     *pmd.Port
	consumer *consumer.Kernel
	iface    *kernelif.Interface
	// foreignAddrs and foreignRoutes are what ForeignKernelConfig found
	// last, for the metrics.
	foreignAddrs, foreignRoutes atomic.Int64
}

// KernelDevargs returns the vdev devargs that create the exception-path
// interface with the NIC's MAC address.
//
// virtio_user's one queue_size sizes both virtqueues, so it is the larger
// of the two descriptor counts (powers of two, config checks). Its mac
// is also the tap's: virtio_user gives the kernel interface its own
// address when the port starts. Offloads are negotiated at the port's
// configure from what it asks for: the exception path asks for none
// (pmd.PortConfig), so virtio_user sets no TUNSETOFFLOAD flag and the
// kernel segments and checksums its TCP itself; what it hands over fits
// the MTU and goes out a NIC without TSO as it is.
func KernelDevargs(k *config.Kernel, portName string, mac net.HardwareAddr) (string, error) {
	switch k.Driver {
	case config.KernelTap:
		return fmt.Sprintf("net_tap_%s,iface=%s,mac=%s", portName, k.Interface, mac), nil
	case config.KernelVirtioUser:
		if _, err := os.Stat(vhostNet); err != nil {
			return "", fmt.Errorf("daemon: kernel.driver %s needs %s: %w (load vhost_net, or use driver: tap)", k.Driver, vhostNet, err)
		}
		return fmt.Sprintf("virtio_user_%s,path=%s,queues=1,queue_size=%d,iface=%s,mac=%s",
			portName, vhostNet, max(k.RxDescriptors, k.TxDescriptors), k.Interface, mac), nil
	}
	return "", fmt.Errorf("daemon: kernel.driver %q unknown", k.Driver)
}

// openKernel creates the kernel interface through DPDK with the port's
// MAC and sets up its one RX and one TX queue. The interface is started
// and configured in the kernel by startKernel, once the port runs.
func (d *Daemon) openKernel() error {
	cfg := d.plan.Config
	k := cfg.Kernel
	if err := kernelif.CheckNamespace(k.NetNS); err != nil {
		return err
	}
	info, err := d.port.Info()
	if err != nil {
		return err
	}
	dev, err := KernelDevargs(k, cfg.Port.Name, info.MAC)
	if err != nil {
		return err
	}
	if err := pmd.ProbeDevice(dev); err != nil {
		return fmt.Errorf("daemon: create kernel interface %s: %w", k.Interface, err)
	}
	kp := &kernelPath{devargs: dev}
	d.kernel = kp
	if kp.port, err = pmd.OpenPort(pmd.DeviceName(dev)); err != nil {
		return err
	}
	// MTU 0: the interface's MTU is set through netlink, where the kernel
	// sees it, after it has moved to its namespace. No offloads: with
	// virtio_user, asking for TCP LRO or RX checksums would let the
	// kernel hand over 64 KiB segments with checksums to do, which the
	// NIC cannot send (KernelDevargs).
	pc := pmd.PortConfig{RxQueues: 1, TxQueues: 1,
		RxDescriptors: uint16(k.RxDescriptors), TxDescriptors: uint16(k.TxDescriptors)}
	return kp.port.Configure(pc, d.pool.C())
}

// newKernelConsumer builds the exception path's consumer over the kernel
// services' rings, highest priority first.
func (d *Daemon) newKernelConsumer() error {
	cfg := d.plan.Config
	var sets []*dispatch.RingSet
	for _, i := range cfg.KernelServices() {
		sets = append(sets, d.owned[i])
	}
	c, err := consumer.NewKernel(consumer.KernelConfig{
		Services: sets, IfPort: d.kernel.port.ID(), Port: d.port.ID(), TxQueue: uint16(cfg.Kernel.TxQueue),
		Budget: cfg.Kernel.Budget, Burst: cfg.Burst,
	})
	if err != nil {
		return err
	}
	d.kernel.consumer = c
	for j, i := range cfg.KernelServices() {
		d.counts[i] = []*consumer.Counts{&c.Services[j]}
	}
	return nil
}

// startKernel starts the interface's port, then moves the interface to
// its namespace and gives it its MTU, addresses and link there.
func (d *Daemon) startKernel() error {
	k := d.plan.Config.Kernel
	if err := d.kernel.port.Start(); err != nil {
		return fmt.Errorf("daemon: start kernel interface %s: %w", k.Interface, err)
	}
	if k.Driver == config.KernelTap && k.MTU > vdevMaxMTU {
		// net_tap would drop every jumbo frame on its way to the kernel.
		if err := d.kernel.port.SetTapTxMTU(uint16(k.MTU)); err != nil {
			return fmt.Errorf("daemon: kernel interface %s at MTU %d: %w", k.Interface, k.MTU, err)
		}
	}
	network := KernelNetwork(k)
	iface, err := kernelif.Setup(kernelif.Config{Name: k.Interface, NetNS: k.NetNS, MTU: k.MTU, Network: network})
	if err != nil {
		return err
	}
	d.kernel.iface = iface
	d.log.Info("kernel interface up", "interface", iface.String(), "driver", k.Driver, "mtu", k.MTU,
		"addresses", network.Addresses, "routes", network.Routes, "services", len(d.kernel.consumer.Services))
	return nil
}

// ForeignKernelConfig returns what is on the exception path's interface
// that the kernel section did not put there; nothing without one. The
// counts also go to the metrics (cephdpdkd_kernel_foreign_config), so
// that a network manager that adopted the tap can be alerted on.
func (d *Daemon) ForeignKernelConfig() (kernelif.Network, error) {
	if d.kernel == nil || d.kernel.iface == nil {
		return kernelif.Network{}, nil
	}
	f, err := d.kernel.iface.Foreign()
	if err != nil {
		return f, err
	}
	d.kernel.foreignAddrs.Store(int64(len(f.Addresses)))
	d.kernel.foreignRoutes.Store(int64(len(f.Routes)))
	return f, nil
}

// KernelNetwork returns the node's addresses and routes that the kernel
// section puts on the exception path.
func KernelNetwork(k *config.Kernel) kernelif.Network {
	var n kernelif.Network
	for _, a := range k.Addresses {
		n.Addresses = append(n.Addresses, a.Prefix)
	}
	for _, r := range k.Routes {
		n.Routes = append(n.Routes, kernelif.Route{To: r.To, Via: r.Via, Metric: r.Metric})
	}
	return n
}

// closeKernel frees what the exception path holds and removes the
// interface. The poll loops must have stopped.
func (d *Daemon) closeKernel() error {
	kp := d.kernel
	if kp == nil {
		return nil
	}
	d.kernel = nil
	if kp.consumer != nil {
		kp.consumer.Close()
	}
	var errs []error
	if kp.port != nil {
		// The interface may live in another namespace now, where the tap
		// driver's ioctls cannot find it by name: stopping can fail
		// harmlessly, and closing its file descriptor removes it anyway.
		if err := kp.port.Stop(); err != nil {
			d.log.Debug("kernel interface stop", "err", err)
		}
		if err := kp.port.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := pmd.RemoveDevice(kp.devargs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
