// Package clean mentions unsafe only in prose: an unsafe.Pointer here
// would be a finding.
package clean

// Pointer is not unsafe.Pointer.
type Pointer struct{ unsafe int }

// Get returns a Pointer.
func Get() Pointer { return Pointer{} }
