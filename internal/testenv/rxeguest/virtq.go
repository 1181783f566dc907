//go:build linux

package rxeguest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// nicID names eth0's virtio-net device in qemu's device tree, for QMP.
const nicID = "nic0"

// nicBackend is the QOM path of eth0's virtio device.
const nicBackend = "/machine/peripheral/" + nicID + "/virtio-backend"

// Virtqueue is one of eth0's virtqueues as both sides of the ring see it:
// qemu's device model (QMP x-query-virtio-queue-status) and the ring's
// own indexes in guest memory, which the driver writes (avail) and the
// device writes (used). Together they say which side a stopped queue
// waits on.
type Virtqueue struct {
	Index int // 0: eth0's receive queue, 1: its transmit queue

	// qemu's state.
	LastAvail      uint16 // the next available entry the device will take
	ShadowAvail    uint16 // the driver's avail index as the device last read it
	InUse          int    // buffers taken and not yet returned
	Used           uint16 // entries the device has returned
	SignalledUsed  uint16 // Used when the device last interrupted the driver
	SignalledValid bool

	// The ring in guest memory (VIRTIO_RING_F_EVENT_IDX negotiated).
	AvailIdx   uint16 // the driver's: buffers made available
	AvailFlags uint16
	UsedEvent  uint16 // the driver's: interrupt me once Used passes this
	UsedIdx    uint16 // the device's, as the driver reads it
	UsedFlags  uint16
	AvailEvent uint16 // the device's: kick me once AvailIdx passes this
}

// needEvent is the virtio ring's vring_need_event: whether moving an index
// from old to new crosses event.
func needEvent(event, new, old uint16) bool { return new-event-1 < new-old }

// Diagnose says, in one line, which side of the ring a stopped queue
// waits on.
func (q Virtqueue) Diagnose() string {
	owed := q.SignalledValid && q.SignalledUsed != q.Used && needEvent(q.UsedEvent, q.Used, q.SignalledUsed)
	if q.Index%2 == 0 {
		// A receive queue's available buffers are empty ones waiting for
		// frames: that some are not taken is the normal, idle state.
		switch {
		case owed:
			return fmt.Sprintf("the device filled receive buffers up to %d, past the driver's used event %d, and last interrupted at %d: an interrupt the device owes",
				q.Used, q.UsedEvent, q.SignalledUsed)
		case q.AvailIdx == q.LastAvail:
			return fmt.Sprintf("no receive buffer posted (all %d filled): the driver has not refilled the ring, and frames for the guest wait at the tap", q.Used)
		}
		return fmt.Sprintf("%d receive buffers posted and waiting for frames", q.AvailIdx-q.LastAvail)
	}
	switch {
	case q.AvailIdx != q.LastAvail && q.AvailIdx != q.ShadowAvail:
		return fmt.Sprintf("the device has not read %d buffers the driver made available (avail %d, device read %d, took %d; kick wanted past %d, used flags %#x): a kick the device did not act on",
			q.AvailIdx-q.LastAvail, q.AvailIdx, q.ShadowAvail, q.LastAvail, q.AvailEvent, q.UsedFlags)
	case q.AvailIdx != q.LastAvail:
		return fmt.Sprintf("the device read the driver's avail index %d but took only up to %d (%d in use): the device model stopped processing the queue",
			q.AvailIdx, q.LastAvail, q.InUse)
	case q.InUse > 0:
		return fmt.Sprintf("the device holds %d buffers it took and has not returned: its backend (the tap) is not taking them", q.InUse)
	case q.Used != q.UsedIdx:
		return fmt.Sprintf("qemu's used index %d differs from the ring's %d", q.Used, q.UsedIdx)
	case owed:
		return fmt.Sprintf("the device returned buffers up to %d, past the driver's used event %d, and last interrupted at %d: an interrupt the device owes",
			q.Used, q.UsedEvent, q.SignalledUsed)
	case q.AvailFlags&1 != 0:
		return fmt.Sprintf("every buffer returned (used %d); the driver has interrupts off (avail flags %#x) and has not reaped them", q.Used, q.AvailFlags)
	default:
		return fmt.Sprintf("every buffer the driver made available was returned (used %d, last interrupt at %d, used event %d): the device's side is done",
			q.Used, q.SignalledUsed, q.UsedEvent)
	}
}

// String gives the figures and the diagnosis.
func (q Virtqueue) String() string {
	return fmt.Sprintf("virtqueue %d: device: last avail %d, shadow avail %d, in use %d, used %d, signalled %d (valid %v); ring: avail idx %d flags %#x used_event %d, used idx %d flags %#x avail_event %d\n  %s",
		q.Index, q.LastAvail, q.ShadowAvail, q.InUse, q.Used, q.SignalledUsed, q.SignalledValid,
		q.AvailIdx, q.AvailFlags, q.UsedEvent, q.UsedIdx, q.UsedFlags, q.AvailEvent, q.Diagnose())
}

// Virtqueues reads eth0's receive and transmit virtqueues through qemu's
// QMP socket, for a failure report: a transmit queue that stopped for
// good (the guest's eth0 logs "transmit queue 0 timed out") is either a
// kick the device did not act on or an interrupt the driver did not get,
// and only the ring tells which.
func (g *Guest) Virtqueues(ctx context.Context) ([]Virtqueue, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := dialQMP(ctx, g.qmpPath)
	if err != nil {
		return nil, err
	}
	defer c.close()
	var qs []Virtqueue
	for _, i := range []int{0, 1} {
		q, err := c.virtqueue(i)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// qmp is a client of qemu's machine protocol.
type qmp struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	c := &qmp{conn: conn, r: bufio.NewReader(conn)}
	if _, err := c.r.ReadBytes('\n'); err != nil { // the greeting
		conn.Close()
		return nil, fmt.Errorf("qmp: greeting: %w", err)
	}
	if err := c.call("qmp_capabilities", nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *qmp) close() { c.conn.Close() }

// call runs command and decodes its return value into ret, skipping the
// events qemu sends in between.
func (c *qmp) call(command string, args, ret any) error {
	msg := map[string]any{"execute": command}
	if args != nil {
		msg["arguments"] = args
	}
	req, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := c.conn.Write(append(req, '\n')); err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("qmp %s: %w", command, err)
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("qmp %s: %w", command, err)
		}
		switch {
		case resp.Error != nil:
			return fmt.Errorf("qmp %s: %s", command, resp.Error.Desc)
		case resp.Return == nil:
			continue // an event
		case ret == nil:
			return nil
		}
		return json.Unmarshal(resp.Return, ret)
	}
}

func (c *qmp) virtqueue(index int) (Virtqueue, error) {
	var st struct {
		InUse          int    `json:"inuse"`
		Avail          uint64 `json:"vring-avail"`
		Used           uint64 `json:"vring-used"`
		Num            int    `json:"vring-num"`
		LastAvail      uint16 `json:"last-avail-idx"`
		ShadowAvail    uint16 `json:"shadow-avail-idx"`
		UsedIdx        uint16 `json:"used-idx"`
		SignalledUsed  uint16 `json:"signalled-used"`
		SignalledValid bool   `json:"signalled-used-valid"`
	}
	if err := c.call("x-query-virtio-queue-status", map[string]any{"path": nicBackend, "queue": index}, &st); err != nil {
		return Virtqueue{}, err
	}
	q := Virtqueue{Index: index, LastAvail: st.LastAvail, ShadowAvail: st.ShadowAvail, InUse: st.InUse,
		Used: st.UsedIdx, SignalledUsed: st.SignalledUsed, SignalledValid: st.SignalledValid}
	// The split ring's layout: avail {flags, idx, ring[num], used_event},
	// used {flags, idx, ring[num] of 8 bytes, avail_event}.
	for _, f := range []struct {
		addr uint64
		dst  *uint16
	}{
		{st.Avail, &q.AvailFlags},
		{st.Avail + 2, &q.AvailIdx},
		{st.Avail + 4 + 2*uint64(st.Num), &q.UsedEvent},
		{st.Used, &q.UsedFlags},
		{st.Used + 2, &q.UsedIdx},
		{st.Used + 4 + 8*uint64(st.Num), &q.AvailEvent},
	} {
		v, err := c.readGuest16(f.addr)
		if err != nil {
			return Virtqueue{}, err
		}
		*f.dst = v
	}
	return q, nil
}

// xpRE matches the monitor's "xp /1hx" answer, e.g.
// "000000000249a002: 0x00b7".
var xpRE = regexp.MustCompile(`^[0-9a-f]+: 0x([0-9a-f]{1,4})\s*$`)

// readGuest16 reads a little-endian 16-bit word at a guest-physical
// address through the human monitor's xp.
func (c *qmp) readGuest16(addr uint64) (uint16, error) {
	var out string
	if err := c.call("human-monitor-command", map[string]any{"command-line": fmt.Sprintf("xp /1hx %#x", addr)}, &out); err != nil {
		return 0, err
	}
	return parseXP(out)
}

func parseXP(out string) (uint16, error) {
	m := xpRE.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return 0, fmt.Errorf("qmp xp: unexpected answer %q", out)
	}
	v, err := strconv.ParseUint(m[1], 16, 16)
	return uint16(v), err
}
