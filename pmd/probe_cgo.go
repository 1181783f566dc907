package pmd

/*
#include "cdd.h"
#include <rte_dev.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
)

// ProbeDevice attaches a device after EAL start (hotplug): vdev devargs
// such as "net_memif0,role=server,socket=/run/x.sock" or a PCI address
// bound to a DPDK driver. Tests use it to create ports in a running EAL.
func ProbeDevice(devargs string) error {
	c := C.CString(devargs)
	defer C.free(unsafe.Pointer(c))
	if rc := C.rte_dev_probe(c); rc != 0 {
		return fmt.Errorf("pmd: probe %q: %w", devargs, Errno(-rc))
	}
	return nil
}

// RemoveDevice detaches a device attached by ProbeDevice; its port must be
// closed.
func RemoveDevice(dev string) error {
	name := DeviceName(dev)
	bus := "vdev"
	if devargs.IsPCI(name) {
		bus = "pci"
	}
	cbus, cname := C.CString(bus), C.CString(name)
	defer C.free(unsafe.Pointer(cbus))
	defer C.free(unsafe.Pointer(cname))
	if rc := C.rte_eal_hotplug_remove(cbus, cname); rc != 0 {
		return fmt.Errorf("pmd: remove %q: %w", name, Errno(-rc))
	}
	return nil
}
