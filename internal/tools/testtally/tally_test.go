package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func ev(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		verbose bool
		wantOut []string // substrings of what is printed
		notOut  []string
		want    []Result // Step and Elapsed left out
	}{
		{
			name: "pass prints the package line, not the test's output",
			in: ev(`{"Action":"run","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: chatty\n"}`,
				`{"Action":"pass","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Output":"PASS\n"}`,
				`{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}`,
				`{"Action":"pass","Package":"p"}`),
			wantOut: []string{"ok  \tp\t0.1s"},
			notOut:  []string{"chatty", "PASS"},
			want:    []Result{{Package: "p", Test: "TestA", Action: "pass"}},
		},
		{
			name: "verbose prints everything",
			in: ev(`{"Action":"run","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: chatty\n"}`,
				`{"Action":"pass","Package":"p","Test":"TestA"}`),
			verbose: true,
			wantOut: []string{"chatty"},
			want:    []Result{{Package: "p", Test: "TestA", Action: "pass"}},
		},
		{
			name: "a failed test's output is printed",
			in: ev(`{"Action":"run","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: broken\n"}`,
				`{"Action":"fail","Package":"p","Test":"TestA"}`,
				`{"Action":"fail","Package":"p"}`),
			wantOut: []string{"broken"},
			want:    []Result{{Package: "p", Test: "TestA", Action: "fail"}},
		},
		{
			name: "a skip keeps its reason",
			in: ev(`{"Action":"run","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: no tool\n"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}`,
				`{"Action":"skip","Package":"p","Test":"TestA"}`),
			want: []Result{{Package: "p", Test: "TestA", Action: "skip", Reason: "a_test.go:9: no tool"}},
		},
		{
			name: "tests running when the package dies fail with it",
			in: ev(`{"Action":"run","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"    last words\n"}`,
				`{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}`,
				`{"Action":"fail","Package":"p"}`),
			wantOut: []string{"last words", "panic: test timed out"},
			want:    []Result{{Package: "p", Test: "TestA", Action: "fail", Reason: "unfinished when the package failed"}},
		},
		{
			name: "a build failure is a failure",
			in: ev(`{"ImportPath":"p","Action":"build-output","Output":"p/a.go:1: syntax error\n"}`,
				`{"ImportPath":"p","Action":"build-fail"}`,
				`{"Action":"start","Package":"p"}`,
				`{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}`,
				`{"Action":"fail","Package":"p"}`),
			wantOut: []string{"syntax error", "[build failed]"},
			want:    []Result{{Package: "p", Action: "fail", Reason: "build failed"}},
		},
		{
			name:    "lines that are not events pass through",
			in:      "go: downloading x v1\n{not json\n",
			wantOut: []string{"go: downloading x v1", "{not json"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := Convert(strings.NewReader(tc.in), &out, Step{Name: "s"}, tc.verbose)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notOut {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
			for i := range got {
				got[i].Step, got[i].Elapsed = "", 0
			}
			if len(got) != len(tc.want) {
				t.Fatalf("results %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("result %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	allow, err := ParseAllow(strings.NewReader(`
# package test reason
service TestManyCores needs 16 cores
github.com/cephdpdkd/cephdpdkd/e2e/x TestY/sub a subtest's reason
`))
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/cephdpdkd/cephdpdkd/"
	pass := Result{Step: "all", Package: mod + "roce", Test: "TestA", Action: "pass"}
	for _, tc := range []struct {
		name string
		rs   []Result
		ok   bool
		want string
	}{
		{"all pass", []Result{pass}, true, "all: 1 ran, 1 passed, 0 failed, 0 skipped"},
		{"an unlisted skip fails", []Result{pass, {Step: "all", Package: mod + "roce", Test: "TestB", Action: "skip", Reason: "no root"}},
			false, "SKIPPED, not in the allow-list: all " + mod + "roce TestB: no root"},
		{"a listed skip passes", []Result{pass, {Step: "all", Package: mod + "service", Test: "TestManyCores", Action: "skip"}},
			true, "1 allowed, 0 not allowed"},
		{"a listed subtest", []Result{{Step: "e2e", Package: mod + "e2e/x", Test: "TestY/sub", Action: "skip"}}, true, "1 allowed"},
		{"the parent of a listed subtest is not listed", []Result{{Step: "e2e", Package: mod + "e2e/x", Test: "TestY", Action: "skip"}}, false, "not in the allow-list"},
		{"a -short skip passes", []Result{{Step: "race", Short: true, Package: mod + "roce", Test: "TestLong", Action: "skip"}},
			true, "1 by -short by design"},
		{"a failure fails", []Result{{Step: "all", Package: mod + "roce", Action: "fail", Reason: "build failed"}}, false, "FAILED all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if ok := Summarize(&out, tc.rs, allow); ok != tc.ok {
				t.Errorf("Summarize = %v, want %v:\n%s", ok, tc.ok, out.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, out.String())
			}
		})
	}
}

func TestParseAllowErrors(t *testing.T) {
	for _, in := range []string{
		"service TestA\n",                          // no reason
		"service TestA why\nservice TestA again\n", // twice
		"github.com/cephdpdkd/cephdpdkd/service TestA why\nservice TestA again\n",
	} {
		if _, err := ParseAllow(strings.NewReader(in)); err == nil {
			t.Errorf("ParseAllow(%q) accepted it", in)
		}
	}
}

// TestRealGoTest runs go test -json on a sample module and checks the
// whole chain, step records to report, against go's real output.
func TestRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a sample module's tests")
	}
	dir := t.TempDir()
	records := filepath.Join(dir, "records")
	allowPath := filepath.Join(dir, "allow")
	for _, fail := range []bool{false, true} {
		cmd := exec.Command("go", "test", "-json", "-count=1", ".")
		cmd.Dir = "testdata/skipper"
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if fail {
			cmd.Env = append(cmd.Env, "FAIL_ONE=1")
		}
		js, _ := cmd.Output() // fails when FAIL_ONE is set
		var out bytes.Buffer
		if err := runStep(bytes.NewReader(js), &out, records, Step{Name: map[bool]string{false: "ok", true: "broken"}[fail]}, false); err != nil {
			t.Fatal(err)
		}
		if fail && !strings.Contains(out.String(), "broken on purpose") {
			t.Errorf("the failed test's output is not printed:\n%s", out.String())
		}
	}
	f, err := os.Open(records)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ReadRecords(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rs {
		count[r.Step+" "+r.Action]++
	}
	// Per run: TestPass, TestSub/runs and TestFail (or its failure);
	// TestSub itself passes; TestSkip and TestSub/skips skip.
	want := map[string]int{"ok pass": 4, "ok skip": 2, "broken pass": 3, "broken fail": 1, "broken skip": 2}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s: %d results, want %d (all: %v)", k, count[k], n, count)
		}
	}
	if err := os.WriteFile(allowPath, []byte("skipper TestSkip no widget on CI\nskipper TestSub/skips needs 16 cores\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	allow, err := ReadAllowFile(allowPath)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if Summarize(&out, rs, allow) {
		t.Errorf("a run with a failure passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "4 allowed, 0 not allowed") {
		t.Errorf("summary:\n%s", out.String())
	}
}

func FuzzParseAllow(f *testing.F) {
	f.Add("service TestA needs 16 cores\n# comment\n\ne2e/x TestY/sub why\n")
	f.Add("a b\n")
	f.Fuzz(func(t *testing.T, in string) {
		a, err := ParseAllow(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, k := range a.Keys() {
			if !a.Allows(k.pkg, k.test) || !a.Allows(modulePrefix+k.pkg, k.test) {
				t.Fatalf("%v is listed but not allowed", k)
			}
		}
	})
}

func FuzzConvert(f *testing.F) {
	f.Add(`{"Action":"run","Package":"p","Test":"T"}` + "\n" + `{"Action":"skip","Package":"p","Test":"T"}` + "\n")
	f.Add(`{"Action":"fail","Package":"p"}` + "\nplain\n")
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		rs, err := Convert(strings.NewReader(in), &out, Step{Name: "f"}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Action != "pass" && r.Action != "fail" && r.Action != "skip" {
				t.Fatalf("result %+v", r)
			}
		}
	})
}
