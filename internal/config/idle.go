package config

import "time"

// IdleSleep is a poll loop's back-off when it has nothing to do: after
// After empty iterations in a row it sleeps, from MinIdleSleep doubling
// up to Max, until work comes. A frame arriving during a sleep waits for
// its end, so Max bounds the latency an idle loop adds, and sets what it
// costs: an idle loop that spins burns a core, which a Ceph node in the
// af_xdp mode shares with ceph-osd.
type IdleSleep struct {
	After int           `yaml:"after"`
	Max   time.Duration `yaml:"max"`
}

// Idle sleep defaults and limits.
const (
	// DefaultIdleSleepAfter empty iterations: a few microseconds of
	// spinning, which a burst in progress does not outlast.
	DefaultIdleSleepAfter = 256
	// DefaultAFXDPIdleSleep is the af_xdp mode's longest sleep; the
	// rebind mode spins unless idle_sleep is set. Each wake-up of an
	// idle loop costs a poll of every queue (net_af_xdp's system calls
	// included): at 1 ms an idle loop took 3.6% of a core on a veth, at
	// 200 µs 7.6%.
	DefaultAFXDPIdleSleep = time.Millisecond
	// MinIdleSleep is the first sleep.
	MinIdleSleep = 10 * time.Microsecond
	// MaxIdleSleep bounds idle_sleep.max: a RoCE frame waits at most
	// this long, far below a QP's retransmit timeout.
	MaxIdleSleep = 10 * time.Millisecond
)

func (c *Config) idleSleepDefaults() {
	if c.IdleSleep == nil {
		c.IdleSleep = &IdleSleep{}
		if c.Port.IsAFXDP() {
			c.IdleSleep.Max = DefaultAFXDPIdleSleep
		}
	}
	orDefault(&c.IdleSleep.After, DefaultIdleSleepAfter)
}

// idleSleep checks idle_sleep.
func (v *validation) idleSleep() {
	s := v.c.IdleSleep
	v.inRange("idle_sleep.after", s.After, 1, 1<<20)
	if s.Max != 0 && (s.Max < MinIdleSleep || s.Max > MaxIdleSleep) {
		v.bad("idle_sleep.max", "%v: want 0 (spin) or %v..%v", s.Max, MinIdleSleep, MaxIdleSleep)
	}
}
