//go:build linux

package rxeguest

import (
	"strings"
	"testing"
)

func TestNeedEvent(t *testing.T) {
	for _, c := range []struct {
		event, new, old uint16
		want            bool
	}{
		{event: 5, new: 6, old: 5, want: true},         // crossed 5 exactly
		{event: 5, new: 5, old: 4, want: false},        // reached, not passed
		{event: 9, new: 6, old: 2, want: false},        // not yet
		{event: 3, new: 10, old: 2, want: true},        // well past
		{event: 65535, new: 1, old: 65534, want: true}, // across the wrap
		{event: 7, new: 7, old: 7, want: false},        // nothing moved
		{event: 4, new: 6, old: 5, want: false},        // passed before the last interrupt
	} {
		if got := needEvent(c.event, c.new, c.old); got != c.want {
			t.Errorf("needEvent(%d, %d, %d) = %v, want %v", c.event, c.new, c.old, got, c.want)
		}
	}
}

func TestVirtqueueDiagnose(t *testing.T) {
	tx := Virtqueue{Index: 1, LastAvail: 100, ShadowAvail: 100, Used: 100, SignalledUsed: 100, SignalledValid: true,
		AvailIdx: 100, UsedEvent: 99, UsedIdx: 100}
	rx := Virtqueue{Index: 0, LastAvail: 8532, ShadowAvail: 8778, Used: 8532, SignalledUsed: 8532, SignalledValid: true,
		AvailIdx: 8778, UsedEvent: 8532, UsedIdx: 8532}
	for _, c := range []struct {
		name string
		base Virtqueue
		edit func(*Virtqueue)
		want string
	}{
		{"healthy", tx, func(*Virtqueue) {}, "the device's side is done"},
		{"lost kick", tx, func(q *Virtqueue) { q.AvailIdx = 356 }, "the device has not read 256 buffers"},
		{"stopped device", tx, func(q *Virtqueue) { q.AvailIdx, q.ShadowAvail, q.InUse = 140, 140, 1 }, "stopped processing"},
		{"held by the backend", tx, func(q *Virtqueue) { q.InUse = 3 }, "has not returned"},
		{"owed interrupt", tx, func(q *Virtqueue) { q.SignalledUsed, q.UsedEvent = 60, 80 }, "an interrupt the device owes"},
		{"suppressed legitimately", tx, func(q *Virtqueue) { q.SignalledUsed, q.UsedEvent = 60, 100 }, "the device's side is done"},
		{"driver not reaping", tx, func(q *Virtqueue) { q.AvailFlags = 1 }, "interrupts off"},
		{"index mismatch", tx, func(q *Virtqueue) { q.UsedIdx = 99 }, "differs"},
		{"receive idle", rx, func(*Virtqueue) {}, "246 receive buffers posted"},
		{"receive not refilled", rx, func(q *Virtqueue) { q.AvailIdx, q.ShadowAvail = 8532, 8532 }, "no receive buffer posted"},
		{"receive owed interrupt", rx, func(q *Virtqueue) { q.Used, q.UsedIdx = 8540, 8540 }, "an interrupt the device owes"},
	} {
		q := c.base
		c.edit(&q)
		if got := q.Diagnose(); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want it to say %q", c.name, got, c.want)
		}
	}
}

func TestParseXP(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint16
		ok   bool
	}{
		{"000000000249a002: 0x00b7\r\n", 0xb7, true},
		{"0000000001234000: 0xffff\n", 0xffff, true},
		{"Cannot access memory\n", 0, false},
		{"", 0, false},
	} {
		got, err := parseXP(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseXP(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}
