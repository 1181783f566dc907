package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// EALLcores is the lcore layout every test EAL uses: lcore 0 main, lcore 1
// for one poll loop. External peers (testpmd) run their lcores on CPU 0 so
// they do not fight the poll loop for CPU 1.
const EALLcores = "0-1"

// StartEAL starts the one EAL a test binary may have, on anonymous memory
// (--no-huge) with a file prefix of its own, and no PCI scan. Call it from
// TestMain; devices are hot-plugged per test with pmd.ProbeDevice.
func StartEAL(name string) (*pmd.EAL, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("testenv: DPDK tests need root")
	}
	return pmd.InitEAL(pmd.EALConfig{
		Lcores:     EALLcores,
		MemoryMB:   512,
		NoHuge:     true,
		FilePrefix: fmt.Sprintf("cdd-test-%s-%d", name, os.Getpid()),
		ExtraArgs:  []string{"--log-level=*:warning"},
	})
}

// RunWithEAL is a TestMain body for packages whose tests use DPDK: it
// starts the test EAL, runs the tests with it, closes it, and returns the
// exit code. A failed EAL start is reported and fails the run.
func RunWithEAL(m *testing.M, name string, eal **pmd.EAL) int {
	e, err := StartEAL(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests need DPDK: %v\n", name, err)
		return 1
	}
	if eal != nil {
		*eal = e
	}
	code := m.Run()
	if err := e.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}
