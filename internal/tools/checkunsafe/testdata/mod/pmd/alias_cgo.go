package pmd

import u "unsafe"

// Peek uses unsafe under another name.
func Peek() u.Pointer { return nil }
