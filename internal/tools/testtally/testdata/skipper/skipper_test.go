// Package skipper is testtally's sample: go test -json on it gives a
// pass, a skip, a subtest's skip and, with FAIL_ONE set, a failure.
package skipper

import (
	"os"
	"testing"
)

func TestPass(t *testing.T) { t.Log("fine") }

func TestSkip(t *testing.T) { t.Skip("no widget here") }

func TestSub(t *testing.T) {
	t.Run("runs", func(t *testing.T) {})
	t.Run("skips", func(t *testing.T) { t.Skipf("needs %d cores", 16) })
}

func TestFail(t *testing.T) {
	if os.Getenv("FAIL_ONE") != "" {
		t.Fatal("broken on purpose")
	}
}
