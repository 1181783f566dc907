package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cephdpdkd/cephdpdkd/roce/pcapcheck"
)

// cmdPcapCheck reports whether the capture has bad RoCEv2 frames.
func cmdPcapCheck(args []string, stdout, stderr io.Writer) (bad bool, err error) {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: cephdpdkd pcap-check FILE")
		return false, errUsage
	}
	f, err := os.Open(args[0])
	if err != nil {
		return false, err
	}
	defer f.Close()
	rep, err := pcapcheck.Check(f)
	if err != nil {
		return false, fmt.Errorf("pcap-check %s: %w", args[0], err)
	}
	if _, err := rep.WriteTo(stdout); err != nil {
		return false, err
	}
	return rep.Bad() > 0, nil
}
