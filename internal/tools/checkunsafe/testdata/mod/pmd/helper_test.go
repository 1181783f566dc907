package pmd

import "unsafe"

// TestOnly is test code: not API, but the import is still outside a *_cgo.go file.
func TestOnly() unsafe.Pointer { return nil }
