package sysguest

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// File is a file Boot puts into the guest's root before systemd starts.
type File struct {
	// Path is the absolute path in the guest.
	Path string
	// Mode is the permission bits (0644 when zero).
	Mode uint32
	// Data is the content.
	Data []byte
	// Link, when set, makes the file a symbolic link to Link (Data and
	// Mode are ignored): how a unit is enabled, in a .wants directory.
	Link string
}

// newc header fields, each 8 hex digits, after the "070701" magic.
const (
	cpioMagic   = "070701"
	cpioTrailer = "TRAILER!!!"
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeLink    = 0o120000
)

// writeCPIO writes files as an uncompressed newc archive, the format the
// kernel unpacks into its initramfs, preceded by an entry for every
// directory above them (the kernel creates none itself). Existing
// directories of the image are left as they are; existing files are
// replaced.
func writeCPIO(w io.Writer, files []File) error {
	dirs := map[string]bool{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return fmt.Errorf("sysguest: guest path %q: want a clean absolute file path", f.Path)
		}
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	// Parents first: "/a" sorts before "/a/b".
	sort.Strings(names)
	cw := &cpioWriter{w: w}
	for _, d := range names {
		cw.entry(d, modeDir|0o755, nil)
	}
	for _, f := range files {
		if f.Link != "" {
			cw.entry(f.Path, modeLink|0o777, []byte(f.Link))
			continue
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		cw.entry(f.Path, modeFile|mode&0o7777, f.Data)
	}
	cw.entry(cpioTrailer, 0, nil)
	return cw.err
}

type cpioWriter struct {
	w   io.Writer
	n   int64 // bytes written, for the 4-byte alignment
	ino uint32
	err error
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	if name != cpioTrailer {
		name = strings.TrimPrefix(name, "/")
	}
	c.ino++
	nlink := 1
	if mode&modeDir != 0 {
		nlink = 2
	}
	// ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor
	// rdevminor namesize check
	c.write(fmt.Appendf(nil, "%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		cpioMagic, c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}
