// Command testtally keeps scripts/test.sh honest about skipped tests.
//
// `go test` reports a package whose tests all skipped as ok, so a machine
// that lacks a tool, root or hugepages would pass the suite while testing
// nothing. testtally reads `go test -json` on stdin, prints what go test
// would have printed (everything with -v; otherwise each package's result
// line and the output of failed tests), and appends one record per test
// result to a file. At the end of the suite, `testtally -report` reads the
// records of every step and fails if a test skipped in a full step
// without an entry in the allow-list file, which gives each allowed skip
// a reason. Skips in a step marked -short (tests that skip themselves in
// -short mode by design) are counted apart and never fail the suite: the
// full steps run those tests again.
//
// Usage:
//
//	go test -json ./... | testtally -step NAME [-short] [-v] -record FILE
//	testtally -report -allow FILE RECORD...
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	var (
		step   = flag.String("step", "", "the suite step's `name`, for the report")
		short  = flag.Bool("short", false, "the step runs go test -short: its skips are by design")
		verb   = flag.Bool("v", false, "print every test's output, as go test -v does")
		record = flag.String("record", "", "append the step's results to `file`")
		report = flag.Bool("report", false, "read the record files named as arguments and check their skips")
		allow  = flag.String("allow", "", "the skip allow-list `file` (with -report)")
	)
	flag.Parse()
	if *report {
		os.Exit(runReport(os.Stdout, *allow, flag.Args()))
	}
	if *record == "" || *step == "" {
		fmt.Fprintln(os.Stderr, "testtally: -step and -record are required (or -report)")
		os.Exit(2)
	}
	if err := runStep(os.Stdin, os.Stdout, *record, Step{Name: *step, Short: *short}, *verb); err != nil {
		fmt.Fprintln(os.Stderr, "testtally:", err)
		os.Exit(1)
	}
}

// runStep copies a go test -json stream to out as text and appends the
// step's results to the record file.
func runStep(in io.Reader, out io.Writer, recordPath string, s Step, verbose bool) error {
	f, err := os.OpenFile(recordPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	results, err := Convert(in, out, s, verbose)
	if werr := WriteRecords(f, results); err == nil {
		err = werr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func runReport(out io.Writer, allowPath string, files []string) int {
	allowed, err := ReadAllowFile(allowPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtally:", err)
		return 2
	}
	var all []Result
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testtally:", err)
			return 2
		}
		rs, err := ReadRecords(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testtally: %s: %v\n", name, err)
			return 2
		}
		all = append(all, rs...)
	}
	if !Summarize(out, all, allowed) {
		return 1
	}
	return 0
}
