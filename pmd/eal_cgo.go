package pmd

/*
#cgo pkg-config: libdpdk
#include "cdd.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/yerden/go-dpdk/eal"
)

// Errno is a DPDK error number (rte_errno or a negative return value).
type Errno int

func (e Errno) Error() string { return C.GoString(C.rte_strerror(C.int(e))) }

// EAL is a running DPDK Environment Abstraction Layer. There is at most one
// per process; the caller owns it and must Close it.
type EAL struct {
	cfg       EALConfig
	closeOnce sync.Once
	closeErr  error
}

// InitEAL starts the EAL. Worker lcores wait for work sent by RunOnLcore;
// the main lcore thread is taken over for DPDK's own use.
func InitEAL(cfg EALConfig) (*EAL, error) {
	args, err := cfg.Args()
	if err != nil {
		return nil, err
	}
	if _, err := eal.Init(args); err != nil {
		if errors.Is(err, syscall.EALREADY) || strings.Contains(err.Error(), "already") {
			return nil, ErrEALInitialized
		}
		return nil, fmt.Errorf("pmd: EAL init with %q: %w", args, err)
	}
	return &EAL{cfg: cfg}, nil
}

// HasHugepages reports whether the EAL runs on hugepage memory.
func (e *EAL) HasHugepages() bool { return eal.HasHugePages() }

// RunOnLcore runs fn on the EAL thread of lcore, which is pinned to its CPU
// and locked to its OS thread for as long as fn runs. The returned channel
// receives fn's panic (as an error) or nil when fn returns.
func (e *EAL) RunOnLcore(lcore uint, fn func()) <-chan error {
	ch := make(chan error, 1)
	eal.ExecOnLcoreAsync(lcore, ch, func(*eal.LcoreCtx) { fn() })
	return ch
}

// Close stops the lcore threads and releases EAL memory. Every port must
// be closed and every mempool freed first.
func (e *EAL) Close() error {
	e.closeOnce.Do(func() {
		eal.StopLcores()
		if err := eal.Cleanup(); err != nil {
			e.closeErr = fmt.Errorf("pmd: EAL cleanup: %w", err)
		}
	})
	return e.closeErr
}
