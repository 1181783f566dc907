//go:build linux

package qemuvm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// localShell is a Shell on a local sh reading commands from a pipe, as a
// guest's shell reads its serial port: the same protocol, no qemu.
func localShell(t *testing.T) *Shell {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-s")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	con := NewConsole()
	go con.Collect(outR)
	t.Cleanup(func() {
		inW.Close()
		cmd.Process.Kill()
		cmd.Wait()
		outR.Close()
	})
	return NewShell(con, inW, "local", 4000)
}

func TestShellRun(t *testing.T) {
	sh := localShell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		cmd  string
		out  string
		code int
	}{
		{"echo hello", "hello\n", 0},
		{"printf 'no newline'", "no newline", 0},
		{"exit 3", "", 3},
		{"false", "", 1},
		{`echo "it's" 'a "quote"'`, "it's a \"quote\"\n", 0},
		{"echo err >&2", "err\n", 0},
		{"cat; echo done", "done\n", 0}, // stdin is /dev/null
		{"echo __CDDE1__ 0; echo after", "__CDDE1__ 0\nafter\n", 0},
		{"(", "", 2},
	}
	for _, tt := range tests {
		out, code, err := sh.Run(ctx, tt.cmd)
		if err != nil {
			t.Fatalf("Run(%q): %v", tt.cmd, err)
		}
		if code != tt.code || (tt.out != "" && out != tt.out) {
			t.Errorf("Run(%q) = %q, %d; want %q, %d", tt.cmd, out, code, tt.out, tt.code)
		}
	}
	if _, _, err := sh.Run(ctx, "echo a\necho b"); err == nil {
		t.Error("a command with a line break ran")
	}
	if _, _, err := sh.Run(ctx, strings.Repeat("x", 5000)); err == nil {
		t.Error("a command longer than the line limit ran")
	}
	if a, b := sh.Next(), sh.Next(); a == b {
		t.Errorf("Next returned %d twice", a)
	}
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if _, code, err := sh.Run(short, "sleep 5"); !errors.Is(err, context.DeadlineExceeded) || code != -1 {
		t.Errorf("Run past its deadline: %d, %v; want -1, %v", code, err, context.DeadlineExceeded)
	}
}

func TestConsoleStripsControl(t *testing.T) {
	c := NewConsole()
	c.append([]byte("a\r\nb\x1b[6n\x1b7c"))
	c.append([]byte("\x1b[1")) // a sequence split across reads
	c.append([]byte(";2Hd\n"))
	if got, want := c.String(), "a\nbcd\n"; got != want {
		t.Errorf("console %q, want %q", got, want)
	}
	if c.Len() != len("a\nbcd\n") {
		t.Errorf("Len %d", c.Len())
	}
}
