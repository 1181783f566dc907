package config

import (
	"strings"
	"testing"
)

// checkErr reports a mismatch between err, returned by what, and want:
// err must mention each non-empty string of want, or be nil when there
// is none. It returns whether err is nil.
func checkErr(t *testing.T, what string, err error, want ...string) bool {
	t.Helper()
	var ws []string
	for _, w := range want {
		if w != "" {
			ws = append(ws, w)
		}
	}
	switch {
	case len(ws) == 0 && err != nil:
		t.Errorf("%s: %v", what, err)
	case len(ws) > 0 && err == nil:
		t.Errorf("%s succeeded; want an error with %q", what, ws)
	}
	for _, w := range ws {
		if err != nil && !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
	return err == nil
}
