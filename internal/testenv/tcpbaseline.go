package testenv

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

// KernelTCPThroughput sends n bytes over kernel TCP on a veth pair
// between two namespaces, in 1 MiB writes, and returns MB/s: the
// baseline a userspace path on this machine is compared with, measured
// in the same run.
func KernelTCPThroughput(t testing.TB, n int) float64 {
	t.Helper()
	v := NewVethNS(t, netip.MustParsePrefix("10.89.0.2/24"))
	other := NewNetNS(t)
	// Move the host end into the second namespace: two namespaces, one veth.
	for _, args := range [][]string{
		{"link", "set", v.HostIf, "netns", other.Name},
		{"-n", other.Name, "addr", "add", "10.89.0.1/24", "dev", v.HostIf},
		{"-n", other.Name, "link", "set", v.HostIf, "arp", "on", "promisc", "off", "up"},
	} {
		if err := netcmd.IP(args...); err != nil {
			t.Fatal(err)
		}
	}
	var ln net.Listener
	if err := v.Do(func() (err error) { ln, err = net.Listen("tcp", "10.89.0.2:7000"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		k, _ := io.Copy(io.Discard, c)
		c.Close()
		done <- k
	}()
	var conn net.Conn
	if err := other.Do(func() (err error) { conn, err = net.DialTimeout("tcp", "10.89.0.2:7000", 5*time.Second); return }); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	start := time.Now()
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := conn.Write(chunk[:min(len(chunk), n-sent)]); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	if got := <-done; got != int64(n) {
		t.Fatalf("kernel TCP: %d bytes of %d", got, n)
	}
	return float64(n) / time.Since(start).Seconds() / 1e6
}
