// Package harness defines TB, the part of testing.TB that the test
// environment's set-up functions (testenv.NewNetNS, cephcluster.Start,
// qemuvm.NewSwitch, rxeguest.Boot, ...) use. A *testing.T satisfies it,
// and so can a program that drives the same set-up outside a test (see
// internal/tools/tryceph): testing.TB itself cannot be implemented
// outside package testing. RequireCommands is the check for the commands
// a set-up runs.
package harness

import "os/exec"

// TB is what the set-up functions need from their caller: a place to
// log, to report failures and to register the cleanups that undo what
// they made. Its methods mean what testing.TB's do: Fatal, Fatalf, Skip
// and Skipf do not return; cleanups run last-registered first.
type TB interface {
	Helper()
	Cleanup(f func())
	TempDir() string
	Log(args ...any)
	Logf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
	Failed() bool
}

// RequireCommands skips t unless each of names is a command on PATH;
// where says where to get them (a package, a script), shown with the
// first one missing.
func RequireCommands(t TB, where string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("needs %s (%s): %v", name, where, err)
		}
	}
}
