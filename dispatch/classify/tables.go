package classify

// The lookup tables a Classifier compiles its rules into: per header
// field, a map from the field's value to the set of rules (bits of a
// uint64) that accept it.

import (
	"math/bits"
	"net/netip"
	"slices"
)

// maxTrieNodes bounds the memory of each destination prefix table (1 KiB
// per node). A /32 costs at most 3 nodes and a /128 at most 15, so this
// leaves room for hundreds of host prefixes.
const maxTrieNodes = 4096

// keyRange gives the rule bit to the keys lo..hi of a table16.
type keyRange struct {
	lo, hi uint16
	bit    uint64
}

// table16 maps a 16-bit key (port, ethertype) to a rule mask in two steps:
// key to class, class to mask. There are few distinct masks, so the
// 65536-entry class table is of bytes (64 KiB) unless more than 256 classes
// are needed, and a table with a single class is not stored at all.
type table16 struct {
	class8  *[1 << 16]uint8
	masks8  *[256]uint64
	class16 *[1 << 16]uint16
	masks   []uint64
	all     uint64 // the mask of every key, when there is one class
}

func (t *table16) lookup(k uint16) uint64 {
	if t.class8 != nil {
		return t.masks8[t.class8[k]]
	}
	if t.class16 != nil {
		return t.masks[t.class16[k]]
	}
	return t.all
}

// buildTable16 returns the table mapping each key to base plus the bits of
// the ranges containing it.
func buildTable16(base uint64, ranges []keyRange) table16 {
	if len(ranges) == 0 {
		return table16{all: base}
	}
	// Sweep the range boundaries: between consecutive boundaries the set
	// of covering ranges is constant. Per-bit counts handle overlapping
	// ranges of one rule.
	type event struct {
		key   int
		bit   uint64
		delta int
	}
	events := make([]event, 0, 2*len(ranges))
	for _, r := range ranges {
		events = append(events, event{int(r.lo), r.bit, +1}, event{int(r.hi) + 1, r.bit, -1})
	}
	slices.SortFunc(events, func(a, b event) int { return a.key - b.key })

	var (
		count   [MaxRules]int
		cur     = base
		classOf = map[uint64]int{}
		masks   []uint64
		class   = make([]uint16, 1<<16)
	)
	classFor := func(m uint64) uint16 {
		id, ok := classOf[m]
		if !ok {
			id = len(masks)
			classOf[m] = id
			masks = append(masks, m)
		}
		return uint16(id)
	}
	e := 0
	for key := 0; key < 1<<16; {
		for e < len(events) && events[e].key == key {
			i := bits.TrailingZeros64(events[e].bit)
			count[i] += events[e].delta
			if count[i] > 0 {
				cur |= events[e].bit
			} else {
				cur &^= events[e].bit
			}
			e++
		}
		next := 1 << 16
		if e < len(events) && events[e].key < next {
			next = events[e].key
		}
		id := classFor(cur)
		for ; key < next; key++ {
			class[key] = id
		}
	}

	if len(masks) == 1 {
		return table16{all: masks[0]}
	}
	if len(masks) <= 256 {
		t := table16{class8: new([1 << 16]uint8), masks8: new([256]uint64)}
		for k, id := range class {
			t.class8[k] = uint8(id)
		}
		copy(t.masks8[:], masks)
		return t
	}
	return table16{class16: (*[1 << 16]uint16)(class), masks: masks}
}

// trie maps an address to the mask of rules whose prefixes contain it. It
// is a multibit trie with 8-bit strides, leaf-pushed: each entry of a node
// is either a child node or a leaf holding a mask class, so a lookup reads
// at most one entry per address byte (4 for IPv4, 16 for IPv6).
type trie struct {
	nodes [][256]uint32 // node 0 is the root
	masks []uint64
}

const trieLeaf = 1 << 31

func (t *trie) lookup(addr []byte) uint64 {
	n := 0
	for _, b := range addr {
		e := t.nodes[n][b]
		if e&trieLeaf != 0 {
			return t.masks[e&^trieLeaf]
		}
		n = int(e)
	}
	// Unreachable: entries of the deepest level are all leaves.
	return 0
}

// lookup4 is lookup for the IPv4 address a, as a number.
func (t *trie) lookup4(a uint32) uint64 {
	n := uint32(0)
	for shift := 24; shift >= 0; shift -= 8 {
		e := t.nodes[n][uint8(a>>shift)]
		if e&trieLeaf != 0 {
			return t.masks[e&^trieLeaf]
		}
		n = e
	}
	// Unreachable, as for lookup.
	return 0
}

// trieBuilder collects prefixes before leaf pushing. Node i of the builder
// becomes node i of the trie.
type trieBuilder struct {
	addrLen int
	base    uint64 // bits of rules matching every address: no prefix, or /0
	nodes   []*trieBuildNode
}

type trieBuildNode struct {
	own   [256]uint64 // bits of prefixes that end at this level and cover the entry
	child [256]int32  // 0: none (the root is never a child)
}

func newTrieBuilder(addrLen int, base uint64) *trieBuilder {
	return &trieBuilder{addrLen: addrLen, base: base, nodes: []*trieBuildNode{new(trieBuildNode)}}
}

// insert adds a masked prefix; it reports false if that would need more
// than maxTrieNodes nodes.
func (b *trieBuilder) insert(p netip.Prefix, bit uint64) bool {
	l := p.Bits()
	if l == 0 {
		b.base |= bit
		return true
	}
	a := p.Addr().AsSlice()
	last := (l - 1) / 8 // the byte in which the prefix ends
	n := 0
	for d := 0; d < last; d++ {
		c := b.nodes[n].child[a[d]]
		if c == 0 {
			if len(b.nodes) == maxTrieNodes {
				return false
			}
			c = int32(len(b.nodes))
			b.nodes = append(b.nodes, new(trieBuildNode))
			b.nodes[n].child[a[d]] = c
		}
		n = int(c)
	}
	// The prefix covers the entries of node n whose top l-8*last bits
	// equal those of a[last].
	free := 8 - (l - 8*last)
	lo := int(a[last]) &^ (1<<free - 1)
	for v := lo; v < lo+1<<free; v++ {
		b.nodes[n].own[v] |= bit
	}
	return true
}

// build pushes every prefix's bit down to the leaves below it and
// deduplicates the leaf masks.
func (b *trieBuilder) build() trie {
	t := trie{nodes: make([][256]uint32, len(b.nodes))}
	classOf := map[uint64]uint32{}
	var walk func(n int, inherited uint64)
	walk = func(n int, inherited uint64) {
		bn := b.nodes[n]
		for v := range 256 {
			m := inherited | bn.own[v]
			if c := bn.child[v]; c != 0 {
				t.nodes[n][v] = uint32(c)
				walk(int(c), m)
				continue
			}
			id, ok := classOf[m]
			if !ok {
				id = uint32(len(t.masks))
				classOf[m] = id
				t.masks = append(t.masks, m)
			}
			t.nodes[n][v] = trieLeaf | id
		}
	}
	walk(0, b.base)
	return t
}
