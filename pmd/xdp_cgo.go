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

// LoadXDP loads the BPF object obj with libbpf and returns a descriptor
// of its program named prog, which the caller attaches and closes, and
// the program's id.
func LoadXDP(obj []byte, prog string) (fd int, id uint32, err error) {
	if len(obj) == 0 {
		return -1, 0, fmt.Errorf("pmd: loading XDP program %s: empty object", prog)
	}
	cobj := C.CBytes(obj)
	defer C.free(cobj)
	cprog := C.CString(prog)
	defer C.free(unsafe.Pointer(cprog))
	var cfd C.int
	var cid C.uint
	if rc := C.cdd_xdp_load(cobj, C.size_t(len(obj)), cprog, &cfd, &cid); rc != 0 {
		return -1, 0, syscall.Errno(-rc)
	}
	return int(cfd), uint32(cid), nil
}
