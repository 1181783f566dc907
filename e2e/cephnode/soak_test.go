//go:build soak

package cephnode

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

// The soak's faults, in the order the schedule injects them; "none" is
// the quiet start, before the first.
const (
	faultNone     = "none"
	faultDaemon   = "daemon-kill"
	faultOSD      = "osd-restart"
	faultMon      = "mon-restart"
	faultLossy    = "lossy-link"
	faultVanished = "vanished-client"
	faultStorm    = "reconnect-storm"
)

var soakFaults = []string{faultDaemon, faultOSD, faultMon, faultLossy, faultVanished, faultStorm}

// soakOp is one put by one of the soak's clients: the object, the sha256
// of what was written, and whether the client was told it was written.
type soakOp struct {
	client string // "tcp" or "roce"
	name   string
	sum    string
	ok     bool
	fault  string // the fault whose window the put ended in
}

// soakLedger records every put, each in the window of the fault injected
// last when it ended.
type soakLedger struct {
	mu       sync.Mutex
	fault    string
	injected map[string]int
	ops      []soakOp
}

func (l *soakLedger) add(op soakOp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	op.fault = l.fault
	l.ops = append(l.ops, op)
}

// inject opens the window of a fault.
func (l *soakLedger) inject(fault string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = fault
	l.injected[fault]++
}

// acked returns how many puts of client were acknowledged so far.
func (l *soakLedger) acked(client string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, op := range l.ops {
		if op.client == client && op.ok {
			n++
		}
	}
	return n
}

// TestSoak runs mixed load on one RoCE node for CDD_SOAK_MINUTES minutes
// (scripts/soak.sh) while faults are injected on a schedule, each kind
// in turn: the daemon killed and started again, the OSD stopped and
// started, the monitor restarted, 1% loss on the guest's link for 20 s,
// the guest's clients vanishing mid-connection, a reconnect storm. The
// load: a TCP client in the bridge's namespace puts 64 KiB objects
// through the daemon's kernel path, and a Soft-RoCE client in the guest
// puts 256 KiB ones through the bridge, each put a rados process whose
// exit status is the acknowledgement. Once each fault is over, both
// clients must have a put acknowledged before the next. At the end every
// acknowledged object is read back by a TCP client and compared by
// sha256, and the node must be idle and clean (finish). It prints, and
// logs, one row per fault kind:
//
//	SOAK fault injected ops errors lost
//
// ops: puts that ended in the fault's windows; errors: those the client
// was told failed; lost: acknowledged objects that do not read back
// byte-identical (the test fails unless 0).
func TestSoak(t *testing.T) {
	requireTools(t)
	minutes, err := strconv.Atoi(os.Getenv("CDD_SOAK_MINUTES"))
	if err != nil || minutes < 1 {
		t.Fatalf("CDD_SOAK_MINUTES=%q: want the soak's length in minutes (scripts/soak.sh --minutes M)", os.Getenv("CDD_SOAK_MINUTES"))
	}
	soakFor := time.Duration(minutes) * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), soakFor+20*time.Minute)
	defer cancel()
	logf := stepLog(t)
	rn := startRoCENode(ctx, t, logf)
	l := &soakLedger{fault: faultNone, injected: map[string]int{}}

	stopTCP := make(chan struct{})
	tcpDone := make(chan struct{})
	tcpDir := t.TempDir()
	go func() { defer close(tcpDone); soakTCPClient(ctx, rn, l, tcpDir, stopTCP) }()
	roce := startSoakRoCEClient(t, rn)

	// A fault every slot; the slots divide the soak evenly, none shorter
	// than a fault takes to inject and its clients to recover.
	const minSlot = 40 * time.Second
	slots := max(int(soakFor/minSlot), len(soakFaults))
	slot := soakFor / time.Duration(slots+1) // and a quiet one first
	end := time.Now().Add(soakFor)
	logf("soak: %v, %d faults, one every %v", soakFor, slots, slot.Round(time.Second))
	next := time.Now().Add(slot)
	for i := 0; time.Now().Add(slot/2).Before(end) || i < len(soakFaults); i++ {
		for time.Now().Before(next) {
			roce.poll(l)
			time.Sleep(time.Second)
		}
		fault := soakFaults[i%len(soakFaults)]
		roce.poll(l)
		l.inject(fault)
		start := time.Now()
		rn.injectSoakFault(t, logf, fault)
		injected := time.Since(start).Seconds()
		logf("soak: %s injected in %.1f s", fault, injected)
		// Both clients recover before the next fault: each has a put
		// acknowledged once the fault is over.
		roce.poll(l)
		tcp0, roce0 := l.acked("tcp"), l.acked("roce")
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
			roce.poll(l)
			if l.acked("tcp") > tcp0 && l.acked("roce") > roce0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("soak: after %s, in 3 minutes, the TCP client had %d puts acknowledged and the RoCE client %d\n%s",
					fault, l.acked("tcp")-tcp0, l.acked("roce")-roce0, rn.netState())
			}
		}
		logf("soak: both clients acknowledged a put again %.1f s after %s was over", time.Since(start).Seconds()-injected, fault)
		if next = next.Add(slot); next.Before(time.Now()) {
			next = time.Now()
		}
	}
	close(stopTCP)
	<-tcpDone
	roce.stop(t, l)

	lost := soakReadBack(t, rn, l.ops)
	table := soakTable(l, lost)
	fmt.Print(table)
	t.Log("\n" + table)
	for fault, n := range lost {
		t.Errorf("soak: %d acknowledged objects lost in the windows of %s", n, fault)
	}
	rn.finish(t, logf)
}

// injectSoakFault injects one fault and returns once it is over (the
// daemon, OSD or monitor back, the link clean again).
func (rn *roceNode) injectSoakFault(t *testing.T, logf func(string, ...any), fault string) {
	t.Helper()
	switch fault {
	case faultDaemon:
		rn.killDaemon(t)
		time.Sleep(2 * time.Second)
		rn.startDaemon(t)
	case faultOSD:
		if err := rn.cl.StopOSD(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := rn.cl.StartOSD(rn.ctx); err != nil {
			t.Fatal(err)
		}
	case faultMon:
		if err := rn.cl.RestartMon(rn.ctx); err != nil {
			t.Fatal(err)
		}
	case faultLossy:
		setLoss(t, rn.br.NS, "numgen random mod 100 < 1 counter drop")
		time.Sleep(20 * time.Second)
		dropped := lossDropped(t, rn.br.NS)
		setLoss(t, rn.br.NS, "")
		logf("soak: 1%% loss for 20 s dropped %d frames", dropped)
	case faultVanished:
		reaped := rn.vanishClient(t, logf)
		logf("soak: the vanished client's sessions reaped in %.1f s", reaped.Seconds())
	case faultStorm:
		rn.reconnectStorm(t, logf, 2, 200)
	default:
		t.Fatalf("soak: no fault %q", fault)
	}
}

// soakTCPClient puts 64 KiB objects of random content from the bridge's
// namespace, through the daemon's kernel path, until stop, pausing half
// a second between puts (the memstore OSD keeps every object in RAM);
// dir holds each object's file while it is put.
func soakTCPClient(ctx context.Context, rn *roceNode, l *soakLedger, dir string, stop <-chan struct{}) {
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		data := make([]byte, 64<<10)
		rand.Read(data)
		sum := sha256.Sum256(data)
		name := fmt.Sprintf("soak-tcp-%d", i)
		path := filepath.Join(dir, name)
		op := soakOp{client: "tcp", name: name, sum: hex.EncodeToString(sum[:])}
		if err := os.WriteFile(path, data, 0o600); err == nil {
			pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			op.ok = rn.cl.Command(pctx, rn.br.NS, "rados", "-p", rn.cl.Pool(), "put", name, path).Run() == nil
			cancel()
		}
		os.Remove(path)
		l.add(op)
	}
}

// soakRoCEClient is the guest's put loop: 256 KiB of random content per
// object, its sha256 taken in the guest, one rados put each, each
// outcome a line of the log on the share ("ok N SUM" or "fail N"),
// until a stop file appears there.
type soakRoCEClient struct {
	rn       *roceNode
	log      string // the share's copy of the guest's log
	stopFile string
	seen     int // lines of the log recorded in the ledger
	proc     *rxeguest.BackgroundCmd
}

func startSoakRoCEClient(t *testing.T, rn *roceNode) *soakRoCEClient {
	t.Helper()
	c := &soakRoCEClient{rn: rn, log: filepath.Join(rn.g.ShareDir(), "soak-roce"),
		stopFile: filepath.Join(rn.g.ShareDir(), "soak-roce-stop")}
	proc, err := rn.g.Start(fmt.Sprintf("i=0; while [ ! -e /mnt/host/soak-roce-stop ]; do i=$((i+1)); head -c 262144 /dev/urandom >/tmp/soak; "+
		"s=$(sha256sum /tmp/soak | cut -c1-64); if timeout 90 rados -p %s put soak-roce-$i /tmp/soak; then echo ok $i $s; else echo fail $i; fi >>/mnt/host/soak-roce; done",
		rn.cl.Pool()))
	if err != nil {
		t.Fatal(err)
	}
	c.proc = proc
	return c
}

// poll records the outcomes the guest logged since the last poll.
func (c *soakRoCEClient) poll(l *soakLedger) {
	f, err := os.Open(c.log)
	if err != nil {
		return // no put has ended yet
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan(); n++ {
		line := sc.Text()
		if n < c.seen {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] == "ok" && (len(f) != 3 || len(f[2]) != 2*sha256.Size)) {
			return // a line still being written: read it next time
		}
		op := soakOp{client: "roce", name: "soak-roce-" + f[1], ok: f[0] == "ok"}
		if op.ok {
			op.sum = f[2]
		}
		l.add(op)
		c.seen = n + 1
	}
}

// stop has the loop end after its current put and records its last.
func (c *soakRoCEClient) stop(t *testing.T, l *soakLedger) {
	t.Helper()
	if err := os.WriteFile(c.stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(c.rn.ctx, 2*time.Minute)
	defer cancel()
	if code, err := c.proc.Wait(ctx); err != nil || code != 0 {
		t.Errorf("soak: the guest's put loop: exit %d, %v", code, err)
	}
	c.poll(l)
}

// soakReadBack reads every acknowledged object back through a TCP
// client, three at a time, and returns, by fault window, how many are
// missing or differ.
func soakReadBack(t *testing.T, rn *roceNode, ops []soakOp) map[string]int {
	t.Helper()
	dir := t.TempDir()
	lost := map[string]int{}
	var mu sync.Mutex
	work := make(chan soakOp)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range work {
				path := filepath.Join(dir, op.name)
				ctx, cancel := context.WithTimeout(rn.ctx, time.Minute)
				out, err := rn.cl.Command(ctx, rn.br.NS, "rados", "-p", rn.cl.Pool(), "get", op.name, path).CombinedOutput()
				cancel()
				got, _ := os.ReadFile(path)
				os.Remove(path)
				sum := sha256.Sum256(got)
				if err != nil || hex.EncodeToString(sum[:]) != op.sum {
					mu.Lock()
					lost[op.fault]++
					mu.Unlock()
					t.Logf("soak: acknowledged %s (%s client, %s window) reads back %d bytes, sha256 %x, want %s (%v %s)",
						op.name, op.client, op.fault, len(got), sum, op.sum, err, strings.TrimSpace(string(out)))
				}
			}
		}()
	}
	n := 0
	for _, op := range ops {
		if op.ok {
			work <- op
			n++
		}
	}
	close(work)
	wg.Wait()
	t.Logf("soak: %d acknowledged objects read back", n)
	return lost
}

// soakTable returns the soak's table, one row per fault kind.
func soakTable(l *soakLedger, lost map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SOAK %-16s %8s %6s %6s %4s\n", "fault", "injected", "ops", "errors", "lost")
	for _, fault := range append([]string{faultNone}, soakFaults...) {
		ops, errors := 0, 0
		for _, op := range l.ops {
			if op.fault == fault {
				ops++
				if !op.ok {
					errors++
				}
			}
		}
		fmt.Fprintf(&b, "SOAK %-16s %8d %6d %6d %4d\n", fault, l.injected[fault], ops, errors, lost[fault])
	}
	return b.String()
}
