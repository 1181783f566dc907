//go:build arm64

package roce

import "C"
