package cephcluster

import (
	"fmt"
	"regexp"
	"strconv"
)

// Bench is what one `rados bench` run reports.
type Bench struct {
	MBps  float64 // Bandwidth (MB/sec)
	Lat   float64 // Average Latency(s)
	Bytes int64   // objects written or read × their size
}

var (
	benchBWRE    = regexp.MustCompile(`Bandwidth \(MB/sec\):\s+([0-9.]+)`)
	benchLatRE   = regexp.MustCompile(`Average Latency\(s\):\s+([0-9.]+)`)
	benchCountRE = regexp.MustCompile(`Total (?:writes|reads) made:\s+([0-9]+)`)
	benchSizeRE  = regexp.MustCompile(`(?:Write|Read) size:\s+([0-9]+)`)
)

// ParseBench reads the summary of a `rados bench` write, seq or rand
// run from its output.
func ParseBench(out []byte) (Bench, error) {
	var b Bench
	bw, lat := benchBWRE.FindSubmatch(out), benchLatRE.FindSubmatch(out)
	count, size := benchCountRE.FindSubmatch(out), benchSizeRE.FindSubmatch(out)
	if bw == nil || lat == nil || count == nil || size == nil {
		return b, fmt.Errorf("rados bench: no summary in\n%s", out)
	}
	b.MBps, _ = strconv.ParseFloat(string(bw[1]), 64)
	b.Lat, _ = strconv.ParseFloat(string(lat[1]), 64)
	n, _ := strconv.ParseInt(string(count[1]), 10, 64)
	sz, _ := strconv.ParseInt(string(size[1]), 10, 64)
	b.Bytes = n * sz
	return b, nil
}
