package dispatch

import "unsafe"

// Ring is a typed handle.
type Ring struct{ r unsafe.Pointer }

// Pointer leaks it, and is listed as known in the test.
func (r *Ring) Pointer() unsafe.Pointer { return r.r }
