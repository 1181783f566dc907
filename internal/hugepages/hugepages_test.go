package hugepages_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages/hugepagestest"
)

func TestReserveRelease(t *testing.T) {
	tests := []struct {
		name           string
		nr, inUse      int
		resv, max      int
		mounted        bool // the mount point holds 2M hugetlbfs already
		pages          int
		wantAdded      int
		wantMount      bool // Reserve mounts
		wantErr        string
		wantNrAfterErr int
	}{
		{name: "enough free, mounted", nr: 600, inUse: 10, mounted: true, pages: 512},
		{name: "short by 4", nr: 100, inUse: 0, mounted: true, pages: 104, wantAdded: 4},
		{name: "pages in use by others", nr: 100, inUse: 98, mounted: true, pages: 10, wantAdded: 8},
		{name: "reserved pages are not available", nr: 10, resv: 6, mounted: true, pages: 10, wantAdded: 6},
		{name: "nothing reserved, nothing mounted", pages: 512, wantAdded: 512, wantMount: true},
		{name: "the kernel grants fewer", nr: 2, max: 100, pages: 512, mounted: true,
			wantErr: "the kernel granted 98 of the 510 more asked for", wantNrAfterErr: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, s := hugepagestest.New(t, tt.nr, tt.inUse)
			k.Resv = tt.resv
			if tt.max > 0 {
				k.Max = tt.max
			}
			k.Sync()
			mnt := filepath.Join(k.Root, "dev/hugepages")
			if tt.mounted {
				os.MkdirAll(mnt, 0o755)
				k.AddMount("nodev " + mnt + " hugetlbfs rw,relatime,pagesize=2M 0 0")
			}
			st, err := s.Reserve("node0", hugepages.Request{Pages: tt.pages, SizeKB: 2048, Mount: mnt})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Reserve: %v, want %q", err, tt.wantErr)
				}
				if k.Nr != tt.wantNrAfterErr {
					t.Errorf("after the failed Reserve nr_hugepages is %d, want %d back", k.Nr, tt.wantNrAfterErr)
				}
				if _, err := os.Stat(s.StatePath("node0")); !os.IsNotExist(err) {
					t.Errorf("state file after a failed Reserve: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Added != tt.wantAdded || k.Nr != tt.nr+tt.wantAdded {
				t.Errorf("added %d (nr %d -> %d), want %d", st.Added, tt.nr, k.Nr, tt.wantAdded)
			}
			if got := len(k.Mounts) > 0; got != tt.wantMount || !k.Mounted(mnt) {
				t.Errorf("mounted by Reserve %v, want %v; mounted now %v", got, tt.wantMount, k.Mounted(mnt))
			}
			_, statErr := os.Stat(s.StatePath("node0"))
			if recorded := statErr == nil; recorded != (tt.wantAdded > 0 || tt.wantMount) {
				t.Errorf("state file written %v; want one only when something was added", recorded)
			}

			rs, err := s.Release(s.StatePath("node0"))
			if err != nil {
				t.Fatal(err)
			}
			if k.Nr != tt.nr {
				t.Errorf("after Release nr_hugepages is %d, want %d", k.Nr, tt.nr)
			}
			if k.Mounted(mnt) != tt.mounted {
				t.Errorf("after Release mounted %v, want %v (unmount only what Reserve mounted)", k.Mounted(mnt), tt.mounted)
			}
			if _, err := os.Stat(mnt); tt.wantMount && !os.IsNotExist(err) {
				t.Errorf("the directory Reserve created is still there: %v", err)
			}
			if (rs != nil) != (tt.wantAdded > 0 || tt.wantMount) {
				t.Errorf("Release returned %+v", rs)
			}
			// Again: nothing left to do.
			if rs, err := s.Release(s.StatePath("node0")); rs != nil || err != nil || k.Nr != tt.nr {
				t.Errorf("second Release: %+v, %v, nr %d", rs, err, k.Nr)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		mount  string // mount table line for the mount point, %s for its path
		sizeKB int
		want   string
	}{
		{name: "not mounted", sizeKB: 2048},
		{name: "2M hugetlbfs", mount: "nodev %s hugetlbfs rw,pagesize=2M 0 0", sizeKB: 2048},
		{name: "1G hugetlbfs for 2M pages", mount: "nodev %s hugetlbfs rw,pagesize=1024M 0 0", sizeKB: 2048,
			want: "is hugetlbfs of 1G pages, not 2M"},
		{name: "tmpfs", mount: "tmpfs %s tmpfs rw 0 0", sizeKB: 2048, want: "is a tmpfs mount, not hugetlbfs"},
		{name: "no 1G pages", sizeKB: 1048576, want: "this kernel has no 1G hugepages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, s := hugepagestest.New(t, 0, 0)
			mnt := filepath.Join(k.Root, "huge")
			if tt.mount != "" {
				k.AddMount(fmt.Sprintf(tt.mount, mnt))
			}
			err := s.Check(hugepages.Request{Pages: 1, SizeKB: tt.sizeKB, Mount: mnt})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check: %v, want %q", err, tt.want)
			}
			if _, err := s.Reserve("p", hugepages.Request{Pages: 1, SizeKB: tt.sizeKB, Mount: mnt}); tt.want != "" && err == nil {
				t.Error("Reserve accepted what Check refuses")
			}
			if tt.want != "" && k.Nr != 0 {
				t.Errorf("a refused Reserve reserved %d pages", k.Nr)
			}
		})
	}
}

// A failed mount gives back the pages added before it.
func TestMountFails(t *testing.T) {
	k, s := hugepagestest.New(t, 0, 0)
	k.MountErr = errors.New("EPERM")
	mnt := filepath.Join(k.Root, "dev/hugepages-2M")
	_, err := s.Reserve("node0", hugepages.Request{Pages: 64, SizeKB: 2048, Mount: mnt})
	if err == nil || !strings.Contains(err.Error(), "mount hugetlbfs (pagesize=2M) on "+mnt+": EPERM") {
		t.Fatalf("Reserve: %v", err)
	}
	if k.Nr != 0 {
		t.Errorf("nr_hugepages %d after the failed mount, want 0", k.Nr)
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Errorf("mount point created for the failed mount is left: %v", err)
	}
}

// After a crash the state file is what gives the pages back: from
// another process (restore-nic), and after a restart that reserved
// again, all of them.
func TestCrashThenRelease(t *testing.T) {
	k, s := hugepagestest.New(t, 0, 0)
	mnt := filepath.Join(k.Root, "dev/hugepages")
	os.MkdirAll(mnt, 0o755)
	req := hugepages.Request{Pages: 64, SizeKB: 2048, Mount: mnt}
	if _, err := s.Reserve("node0", req); err != nil {
		t.Fatal(err)
	}
	// The daemon died; its mount went with its namespace, its pages are
	// still reserved. It restarts before anyone released them.
	k.Unmount(mnt)
	k.Mounts = nil
	st, err := s.Reserve("node0", req)
	if err != nil {
		t.Fatal(err)
	}
	if st.Added != 64 || k.Nr != 64 || len(k.Mounts) != 1 {
		t.Errorf("second Reserve: recorded %d added, nr %d, %d mounts; want 64, 64, 1", st.Added, k.Nr, len(k.Mounts))
	}
	// It dies again; ExecStopPost runs in a namespace without the mount.
	k.Unmount(mnt)
	k.Unmounts = nil
	if _, err := (&hugepages.System{Sysfs: s.Sysfs, Mounts: s.Mounts, RunDir: s.RunDir, WriteFile: k.Write, Unmount: k.Unmount}).Release(s.StatePath("node0")); err != nil {
		t.Fatal(err)
	}
	if k.Nr != 0 || len(k.Unmounts) != 0 {
		t.Errorf("after Release: nr %d (want 0), unmounts %q (want none: it is gone)", k.Nr, k.Unmounts)
	}
}

// TestReleaseOldStateFile: Release (restore-nic) reads the state file
// an earlier release wrote (testdata/node0.hugepages.json: 8 pages added,
// nothing mounted, as written before package statefile) at the path it
// used, and gives the pages back.
func TestReleaseOldStateFile(t *testing.T) {
	old, err := os.ReadFile("testdata/node0.hugepages.json")
	if err != nil {
		t.Fatal(err)
	}
	k, s := hugepagestest.New(t, 108, 0)
	path := filepath.Join(s.RunDir, "node0.hugepages.json")
	if s.StatePath("node0") != path {
		t.Fatalf("state file at %s, want %s", s.StatePath("node0"), path)
	}
	os.MkdirAll(s.RunDir, 0o755)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := s.Release(path)
	if err != nil || st == nil || st.Added != 8 || st.SizeKB != 2048 || st.Time.IsZero() {
		t.Fatalf("Release: %+v, %v", st, err)
	}
	if k.Nr != 100 {
		t.Errorf("nr_hugepages %d after Release, want 100", k.Nr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("state file left: %v", err)
	}
}

// Pages still in use when Release lowers nr_hugepages (the af_xdp
// mode's UMEM, pinned until the process exits) become surplus pages,
// which the kernel frees once released: Release gives them back and
// removes the state file.
func TestReleasePagesInUse(t *testing.T) {
	k, s := hugepagestest.New(t, 0, 0)
	mnt := filepath.Join(k.Root, "dev/hugepages")
	if _, err := s.Reserve("node0", hugepages.Request{Pages: 16, SizeKB: 2048, Mount: mnt}); err != nil {
		t.Fatal(err)
	}
	k.InUse = 12
	if _, err := s.Release(s.StatePath("node0")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.StatePath("node0")); err == nil || k.Nr != 12 || k.Surplus != 12 {
		t.Errorf("after Release with 12 pages in use: nr %d, surplus %d (want 12, 12), state file kept: %v", k.Nr, k.Surplus, err == nil)
	}
}
