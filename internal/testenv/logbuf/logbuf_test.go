package logbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 1000 {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}()
	for range 100 {
		_ = b.String()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 1000 {
		t.Fatalf("%d lines, want 1000", got)
	}
}
