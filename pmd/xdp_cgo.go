package pmd

/*
#cgo pkg-config: libbpf
#include <stdlib.h>
#include "xdp.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// AttachXDP loads the BPF object obj with libbpf and attaches its program
// named prog to the interface ifindex with flags (XDP_FLAGS_*), returning
// the program's id. Once attached, the program lives on with the
// interface, not with this process.
func AttachXDP(obj []byte, prog string, ifindex int, flags uint32) (uint32, error) {
	if len(obj) == 0 {
		return 0, fmt.Errorf("pmd: attaching XDP program %s: empty object", prog)
	}
	cobj := C.CBytes(obj)
	defer C.free(cobj)
	cprog := C.CString(prog)
	defer C.free(unsafe.Pointer(cprog))
	var id C.uint
	if rc := C.cdd_xdp_attach(cobj, C.size_t(len(obj)), cprog, C.int(ifindex), C.uint(flags), &id); rc != 0 {
		return uint32(id), syscall.Errno(-rc)
	}
	return uint32(id), nil
}
