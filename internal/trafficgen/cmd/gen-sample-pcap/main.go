// Command gen-sample-pcap writes a deterministic Ceph-node traffic capture,
// by default the committed sample configs/sample/ceph-node.pcap, and prints
// a summary of its contents as Markdown tables.
//
// Usage:
//
//	go run ./internal/trafficgen/cmd/gen-sample-pcap -o configs/sample/ceph-node.pcap
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/cephdpdkd/cephdpdkd/internal/trafficgen"
)

func main() {
	out := flag.String("o", "ceph-node.pcap", "output pcap `file`")
	n := flag.Int("n", trafficgen.SampleFrames, "number of frames")
	seed := flag.Int64("seed", trafficgen.SampleSeed, "generator seed")
	flag.Parse()
	if flag.NArg() != 0 || *n < 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gen-sample-pcap:", err)
		os.Exit(1)
	}
}

func run(path string, n int, seed int64) error {
	frames := trafficgen.Generate(seed, n, trafficgen.DefaultMix())
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := trafficgen.WritePcap(w, frames); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	fmt.Print(trafficgen.Summarize(frames))
	return nil
}
