package daemon

import (
	"time"

	"github.com/cephdpdkd/cephdpdkd/consumer"
)

// superviseEvery is how often the supervisor checks the service
// processes: how long a dead one's session waits to be recovered, and
// how long a new one waits to show as attached.
const superviseEvery = 20 * time.Millisecond

// superviseProcesses follows the sessions of the service processes
// until Stop: it notices a process attaching, detaching or dying, and
// has the serving loop recover what a dead one left (consumer.Process).
func (d *Daemon) superviseProcesses() {
	var procs []*consumer.Process
	var names []string
	for i, p := range d.procs {
		if p != nil {
			procs = append(procs, p)
			names = append(names, d.services[i].Name)
		}
	}
	if len(procs) == 0 {
		return
	}
	d.superviseStop, d.superviseDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.superviseDone)
		t := time.NewTicker(superviseEvery)
		defer t.Stop()
		for {
			for i, p := range procs {
				d.logProcessEvent(names[i], p.Check(time.Now()))
			}
			select {
			case <-d.superviseStop:
				return
			case <-t.C:
			}
		}
	}()
}

func (d *Daemon) logProcessEvent(service string, e consumer.ProcessEvent) {
	switch e.Kind {
	case consumer.Attached:
		d.log.Info("service process attached", "service", service, "pid", e.PID)
	case consumer.Detached:
		d.log.Info("service process detached", "service", service, "pid", e.PID)
	case consumer.Passed:
		d.log.Info("service process attached and detached", "service", service, "pid", e.PID)
	case consumer.Died:
		d.log.Warn("service process gone without detaching: recovering its mbufs", "service", service, "pid", e.PID)
	case consumer.Recovered:
		d.log.Info("service process recovered", "service", service, "pid", e.PID,
			"held", e.Held, "unacked", e.Unacked, "in_rings", e.Rings)
	}
}

// stopSupervisor ends superviseProcesses' goroutine.
func (d *Daemon) stopSupervisor() {
	if d.superviseStop != nil {
		close(d.superviseStop)
		<-d.superviseDone
		d.superviseStop = nil
	}
}

// procsBusy reports whether a service process still holds its service,
// or a dead one's recovery is pending.
func (d *Daemon) procsBusy() bool {
	for _, p := range d.procs {
		if p != nil && p.Busy() {
			return true
		}
	}
	return false
}
