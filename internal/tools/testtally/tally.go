package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Step names one go test run of the suite.
type Step struct {
	Name string
	// Short marks a -short run, whose tests may skip themselves by design.
	Short bool
}

// Result is one test's (or subtest's) outcome in one step. A package
// that failed without a test to blame (a build error, a panic outside
// a test) is a Result with no Test.
type Result struct {
	Step    string  `json:"step"`
	Short   bool    `json:"short,omitempty"`
	Package string  `json:"package"`
	Test    string  `json:"test,omitempty"`
	Action  string  `json:"action"` // pass, fail or skip
	Reason  string  `json:"reason,omitempty"`
	Elapsed float64 `json:"elapsed,omitempty"`
}

// event is a line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Elapsed    float64
	Output     string
}

type testKey struct{ pkg, test string }

// Convert reads a go test -json stream from in and writes it to out as
// go test would print it: every line with verbose, otherwise the package
// lines and the output of each failed test. It returns every test's
// result. Lines that are not JSON events (go test's own errors) are
// copied as they are.
func Convert(in io.Reader, out io.Writer, s Step, verbose bool) ([]Result, error) {
	var (
		results []Result
		bufs    = map[testKey]*bytes.Buffer{}
		order   []testKey // running tests, in the order they started
		r       = bufio.NewReader(in)
	)
	finish := func(k testKey) *bytes.Buffer {
		b := bufs[k]
		delete(bufs, k)
		for i, o := range order {
			if o == k {
				order = append(order[:i], order[i+1:]...)
				break
			}
		}
		if b == nil {
			b = new(bytes.Buffer)
		}
		return b
	}
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var e event
			if line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
				out.Write(line)
			} else {
				results = handle(e, s, verbose, out, bufs, &order, finish, results)
			}
		}
		if errors.Is(err, io.EOF) {
			return results, nil
		}
		if err != nil {
			return results, err
		}
	}
}

func handle(e event, s Step, verbose bool, out io.Writer, bufs map[testKey]*bytes.Buffer, order *[]testKey,
	finish func(testKey) *bytes.Buffer, results []Result) []Result {
	k := testKey{e.Package, e.Test}
	res := func(action, reason string) Result {
		return Result{Step: s.Name, Short: s.Short, Package: e.Package, Test: e.Test, Action: action, Reason: reason, Elapsed: e.Elapsed}
	}
	switch {
	case e.Action == "build-output":
		io.WriteString(out, e.Output)
	case e.Action == "build-fail":
		results = append(results, Result{Step: s.Name, Short: s.Short, Package: e.ImportPath, Action: "fail", Reason: "build failed"})
	case e.Test == "" && e.Action == "output":
		// -json runs the tests as -v does, which prints a passing
		// package's PASS line; go test without -v does not.
		if verbose || e.Output != "PASS\n" {
			io.WriteString(out, e.Output)
		}
	case e.Test == "" && e.Action == "fail":
		// Tests still running when their package failed (a timeout's
		// panic, a crash) never report: they failed with it.
		var unfinished []testKey
		for _, o := range *order {
			if o.pkg == e.Package {
				unfinished = append(unfinished, o)
			}
		}
		for _, o := range unfinished {
			b := finish(o)
			if !verbose {
				out.Write(b.Bytes())
			}
			results = append(results, Result{Step: s.Name, Short: s.Short, Package: o.pkg, Test: o.test, Action: "fail", Reason: "unfinished when the package failed"})
		}
		if len(unfinished) == 0 && !anyFailed(results, e.Package) {
			results = append(results, res("fail", "the package failed outside its tests"))
		}
	case e.Test == "":
		// The package's start, pass or skip ([no test files]).
	case e.Action == "run":
		bufs[k] = new(bytes.Buffer)
		*order = append(*order, k)
	case e.Action == "output":
		if verbose {
			io.WriteString(out, e.Output)
		}
		if b := bufs[k]; b != nil {
			b.WriteString(e.Output)
		}
	case e.Action == "pass", e.Action == "fail", e.Action == "skip":
		b := finish(k)
		if e.Action == "fail" && !verbose {
			out.Write(b.Bytes())
		}
		reason := ""
		if e.Action == "skip" {
			reason = skipReason(b.String())
		}
		results = append(results, res(e.Action, reason))
	}
	return results
}

func anyFailed(rs []Result, pkg string) bool {
	for _, r := range rs {
		if r.Package == pkg && r.Action == "fail" {
			return true
		}
	}
	return false
}

// skipReason returns the last line a skipped test logged (t.Skip's
// message, as "file_test.go:12: why"), without go test's own headers.
func skipReason(output string) string {
	reason := ""
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		reason = l
	}
	return reason
}

// WriteRecords appends results to w, one JSON object a line.
func WriteRecords(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// ReadRecords reads what WriteRecords wrote.
func ReadRecords(r io.Reader) ([]Result, error) {
	var rs []Result
	dec := json.NewDecoder(r)
	for {
		var x Result
		if err := dec.Decode(&x); errors.Is(err, io.EOF) {
			return rs, nil
		} else if err != nil {
			return rs, err
		}
		rs = append(rs, x)
	}
}

// Summarize prints the suite's counts, step by step and in all, and every
// skip of a full step that allowed does not list. It reports whether the
// suite may pass: no failure and no unlisted skip.
func Summarize(w io.Writer, rs []Result, allowed *AllowList) bool {
	type tally struct{ ran, passed, failed, skipped, allowedSkips int }
	var (
		steps    []string
		perStep  = map[string]*tally{}
		total    tally
		unlisted []Result
		failed   []Result
		byShort  int
		used     = map[allowKey]bool{}
	)
	for _, r := range rs {
		t := perStep[r.Step]
		if t == nil {
			t = new(tally)
			perStep[r.Step] = t
			steps = append(steps, r.Step)
		}
		for _, x := range []*tally{t, &total} {
			if r.Test != "" {
				x.ran++
			}
			switch r.Action {
			case "pass":
				x.passed++
			case "fail":
				x.failed++
			case "skip":
				x.skipped++
			}
		}
		switch {
		case r.Action == "fail":
			failed = append(failed, r)
		case r.Action != "skip":
		case r.Short:
			byShort++
		case allowed.Allows(r.Package, r.Test):
			used[allowed.key(r.Package, r.Test)] = true
			t.allowedSkips++
			total.allowedSkips++
		default:
			unlisted = append(unlisted, r)
		}
	}
	fmt.Fprintln(w, "== test tally (tests and subtests)")
	for _, s := range steps {
		t := perStep[s]
		fmt.Fprintf(w, "step %-10s %5d ran, %5d passed, %d failed, %d skipped (%d allowed)\n",
			s, t.ran, t.passed, t.failed, t.skipped, t.allowedSkips)
	}
	fmt.Fprintf(w, "all: %d ran, %d passed, %d failed, %d skipped: %d by -short by design, %d allowed, %d not allowed\n",
		total.ran, total.passed, total.failed, total.skipped, byShort, total.allowedSkips, len(unlisted))
	for _, r := range failed {
		fmt.Fprintf(w, "FAILED %s %s %s: %s\n", r.Step, r.Package, r.Test, r.Reason)
	}
	for _, r := range unlisted {
		fmt.Fprintf(w, "SKIPPED, not in the allow-list: %s %s %s: %s\n", r.Step, r.Package, r.Test, r.Reason)
	}
	for _, k := range allowed.Keys() {
		if !used[k] {
			fmt.Fprintf(w, "note: allowed skip %s %s did not skip here\n", k.pkg, k.test)
		}
	}
	return len(failed) == 0 && len(unlisted) == 0
}
