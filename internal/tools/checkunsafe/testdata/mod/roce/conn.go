package roce

import "unsafe"

func size() uintptr { return unsafe.Sizeof(0) }
