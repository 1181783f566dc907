package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRead(t *testing.T) {
	type rec struct {
		Port  string `json:"port"`
		Pages int    `json:"pages"`
	}
	path := filepath.Join(t.TempDir(), "run", "p0.json")
	var got rec
	if ok, err := Read(path, &got); ok || err != nil {
		t.Fatalf("Read of no file: %v, %v; want false, nil", ok, err)
	}
	for _, want := range []rec{{"p0", 512}, {"p0", 0}} {
		if err := Write(path, want); err != nil {
			t.Fatal(err)
		}
		got = rec{}
		if ok, err := Read(path, &got); !ok || err != nil || got != want {
			t.Fatalf("Read = %+v, %v, %v; want %+v", got, ok, err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".state-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	os.WriteFile(path, []byte("{half"), 0o600)
	if _, err := Read(path, &got); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Read of a broken record: %v; want an error naming the file", err)
	}
}

func TestPath(t *testing.T) {
	for _, tc := range []struct {
		dir, port, kind, want string
	}{
		{"", "p0", "", "/run/cephdpdkd/p0.json"},
		{"", "p0", "hugepages", "/run/cephdpdkd/p0.hugepages.json"},
		{"/tmp/run", "node0", "", "/tmp/run/node0.json"},
		{"/tmp/run", "node0", "hugepages", "/tmp/run/node0.hugepages.json"},
	} {
		if got := Path(tc.dir, tc.port, tc.kind); got != tc.want {
			t.Errorf("Path(%q, %q, %q) = %s, want %s", tc.dir, tc.port, tc.kind, got, tc.want)
		}
	}
}
