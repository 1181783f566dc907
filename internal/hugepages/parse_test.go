package hugepages

import "testing"

func TestParseSizeAndUnescape(t *testing.T) {
	for in, want := range map[string]int{"2M": 2048, "1024M": 1048576, "1G": 1048576, "2048k": 2048, "2097152": 2048, "x": 0, "": 0} {
		if got := parseSize(in); got != want {
			t.Errorf("parseSize(%q) = %d, want %d", in, got, want)
		}
	}
	if got := unescape(`/mnt/huge\040pages`); got != "/mnt/huge pages" {
		t.Errorf("unescape: %q", got)
	}
	if got := unescape(`/a\04`); got != `/a\04` {
		t.Errorf("unescape of a short escape: %q", got)
	}
}
