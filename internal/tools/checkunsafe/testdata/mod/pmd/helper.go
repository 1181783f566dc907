package pmd

import "unsafe"

var size = unsafe.Sizeof(0)
