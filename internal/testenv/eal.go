package testenv

import (
	"fmt"
	"os"

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
