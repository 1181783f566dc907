package roce

import "github.com/cephdpdkd/cephdpdkd/roce/memlink"

// testLink returns a link config with all four fault probabilities p.
func testLink(p float64) memlink.Config {
	return memlink.Config{Seed: 1, Loss: p, Reorder: p, Duplicate: p, Corrupt: p}
}
