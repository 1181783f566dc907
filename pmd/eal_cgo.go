package pmd

/*
#cgo pkg-config: libdpdk
#include <rte_launch.h>
#include <rte_pdump.h>
#include "cdd.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Errno is a DPDK error number (rte_errno or a negative return value).
type Errno int

func (e Errno) Error() string { return C.GoString(C.rte_strerror(C.int(e))) }

// EAL is a running DPDK Environment Abstraction Layer. There is at most one
// per process; the caller owns it and must Close it.
type EAL struct {
	cfg       EALConfig
	mainStop  chan struct{} // releases the main lcore thread
	pdump     bool          // rte_pdump_init ran
	closeOnce sync.Once
	closeErr  error

	quiesceOnce sync.Once
	quiesce     *Quiescence

	gateMu    sync.Mutex
	gate      *Gate // the interrupt-thread gate, while held
	gateHolds int
}

// ealMu serializes InitEAL; ealStarted is set once rte_eal_init succeeded,
// after which DPDK refuses another init in this process, even after Close.
var (
	ealMu      sync.Mutex
	ealStarted bool
)

// InitEAL starts the EAL. Worker lcores wait for work sent by RunOnLcore;
// the main lcore thread is taken over for DPDK's own use.
func InitEAL(cfg EALConfig) (*EAL, error) {
	args, err := cfg.Args()
	if err != nil {
		return nil, err
	}
	ealMu.Lock()
	defer ealMu.Unlock()
	if ealStarted {
		return nil, ErrEALInitialized
	}
	// DPDK fails on a prefix in use without an error code, after printing
	// only "Is another primary process running?": say which one.
	check := checkPrefixFree
	if cfg.Secondary {
		check = checkPrimary
	}
	if err := check(cfg); err != nil {
		return nil, err
	}

	res := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		// rte_eal_init makes the calling thread the main lcore thread and
		// pins it to that lcore's CPU: keep it away from other goroutines
		// until Close. A locked goroutine that returns takes its thread
		// with it.
		runtime.LockOSThread()
		if err := ealInit(args); err != nil {
			res <- err
			return
		}
		res <- nil
		<-stop
	}()
	if err := <-res; err != nil {
		return nil, err
	}
	ealStarted = true
	e := &EAL{cfg: cfg, mainStop: stop}
	if err := launchWorkers(); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	// DPDK's capture tools (dpdk-dumpcap, dpdk-pdump) are secondary
	// processes that ask the primary to copy its ports' packets to them;
	// a secondary can only attach to hugepage memory whose files are
	// still there (not --huge-unlink).
	if C.rte_eal_process_type() == C.RTE_PROC_PRIMARY && e.HasHugepages() && !cfg.HugeUnlink {
		var errno C.int
		if rc := C.cdd_pdump_init(&errno); rc != 0 {
			return nil, errors.Join(fmt.Errorf("pmd: pdump init: %w", Errno(errno)), e.Close())
		}
		e.pdump = true
	}
	return e, nil
}

// Pdump reports whether the EAL serves DPDK's capture tools
// (dpdk-dumpcap, dpdk-pdump): a primary process on hugepages it keeps
// linked.
func (e *EAL) Pdump() bool { return e.pdump }

// ealInit runs rte_eal_init. A failure is an error even when DPDK leaves
// rte_errno at 0, as it does when another primary holds the file prefix.
func ealInit(args []string) error {
	// The strings stay allocated: DPDK may keep pointers into argv.
	argv := unsafe.Slice((**C.char)(C.calloc(C.size_t(len(args)+1), C.size_t(unsafe.Sizeof((*C.char)(nil))))), len(args)+1)
	for i, a := range args {
		argv[i] = C.CString(a)
	}
	var errno C.int
	if rc := C.cdd_eal_init(C.int(len(args)), &argv[0], &errno); rc >= 0 {
		return nil
	}
	switch errno {
	case 0:
		return fmt.Errorf("pmd: EAL init with %q failed without an error code (DPDK's log above says why)", args)
	case C.EALREADY:
		return ErrEALInitialized
	default:
		return fmt.Errorf("pmd: EAL init with %q: %w", args, Errno(errno))
	}
}

// HasHugepages reports whether the EAL runs on hugepage memory.
func (e *EAL) HasHugepages() bool { return C.rte_eal_has_hugepages() != 0 }

// Close stops the lcore threads and releases EAL memory. Every port must
// be closed, every mempool freed and every function sent by RunOnLcore
// returned first.
func (e *EAL) Close() error {
	e.closeOnce.Do(func() {
		if e.pdump {
			C.rte_pdump_uninit()
		}
		stopWorkers()
		C.rte_eal_mp_wait_lcore()
		if rc := C.rte_eal_cleanup(); rc != 0 {
			e.closeErr = fmt.Errorf("pmd: EAL cleanup: %w", Errno(-rc))
		}
		close(e.mainStop)
	})
	return e.closeErr
}

// launchWorkers starts the job loop on every worker lcore.
func launchWorkers() error {
	for l := C.rte_get_next_lcore(^C.uint(0), 1, 0); l < C.RTE_MAX_LCORE; l = C.rte_get_next_lcore(l, 1, 0) {
		openLcore(uint(l))
		if rc := C.cdd_lcore_launch(l); rc != 0 {
			return fmt.Errorf("pmd: launch lcore %d: %w", l, Errno(-rc))
		}
	}
	return nil
}
