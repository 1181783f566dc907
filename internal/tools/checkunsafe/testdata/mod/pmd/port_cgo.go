package pmd

/*
#include <stdlib.h>
*/
import "C"

import "unsafe"

// Port is a typed handle: its pointer is in an unexported field.
type Port struct {
	p unsafe.Pointer
	n int
}

// Close is fine: no unsafe.Pointer in its signature.
func (p *Port) Close() { C.free(p.p) }

// Raw leaks the pointer.
func (p *Port) Raw() unsafe.Pointer { return p.p }

// Open takes a pointer.
func Open(pool unsafe.Pointer) *Port { return &Port{p: pool} }

// Handle exports its pointer field.
type Handle struct {
	Ptr unsafe.Pointer
}

// raw is unsafe.Pointer under another name; using it in exported API
// leaks as much.
type raw = unsafe.Pointer

// Wrap takes a raw.
func Wrap(r raw) {}

// rawList is built from raw.
type rawList []raw

// Wraps takes a rawList.
func Wraps(r rawList) {}

// hidden keeps its pointer unexported: using it is fine.
type hidden struct{ p unsafe.Pointer }

// Hide returns a hidden.
func Hide() hidden { return hidden{} }

// Global is an exported variable.
var Global unsafe.Pointer

// Callback is a function type.
type Callback func(arg unsafe.Pointer)

// Source is an interface whose method returns a pointer.
type Source interface {
	Next() unsafe.Pointer
}

// unexported functions may do as they like.
func free(p unsafe.Pointer) {}
