package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// adoptTimeout bounds how long a reload waits for every poll loop to
// pick up a new table: a loop iteration takes microseconds, so only a
// stuck or dead loop takes this long.
const adoptTimeout = 5 * time.Second

// ErrReloadRefused wraps a reload that changed nothing: the new
// configuration was invalid or changed what needs a restart, and the
// old one keeps running.
var ErrReloadRefused = errors.New("reload refused; still running the previous configuration")

// ReloadStats says what a reload did.
type ReloadStats struct {
	Kept, Added, Removed, Rebuilt int
	// Freed are the packets left in retired lanes after the drain
	// timeout, freed with them.
	Freed int
	// Closed are the packets of rebuilt services dropped between the
	// retirement of their old lanes and their new ones.
	Closed uint64
	Took   time.Duration
}

// Reload applies plan's configuration to the running data path without
// stopping it. What config.CheckReload refuses, or a pool that would
// have to grow, leaves the running configuration as it is and returns
// an error wrapping ErrReloadRefused.
//
// The poll loops never stop: each takes a new table (classifier,
// services, consumers; see dispatch.Poller) at the top of an iteration,
// and acknowledges it, without a lock or an allocation per packet.
// Services kept from the old configuration keep their lanes, consumers
// and counters, so they lose nothing. Then, in up to three swaps:
//
//  1. the new rules and services; removed services, and the old
//     versions of rebuilt ones, retire: nothing is classified to them
//     and their consumers run until their lanes are empty (bounded by
//     shutdown.drain_timeout). Rebuilt services are closed meanwhile:
//     their packets are dropped and counted.
//  2. once drained, a table without the retired services (and without
//     the kernel exception path, if its services change); once every
//     loop has it, nothing touches the retired lanes: they are freed
//     with what is left in them, and the kernel path is rewired.
//  3. the rebuilt services' new lanes, and the kernel path back.
func (d *Daemon) Reload(ctx context.Context, plan *Plan) (ReloadStats, error) {
	var st ReloadStats
	start := time.Now()
	old, cfg := d.plan.Config, plan.Config
	if d.manual {
		return st, fmt.Errorf("daemon: %w: the poll loops are driven by hand", ErrReloadRefused)
	}
	r, err := config.CheckReload(old, cfg)
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrReloadRefused, err)
	}
	if plan.PoolSize > d.pool.Size() {
		return st, fmt.Errorf("%w: %w", ErrReloadRefused, cfg.Problem("services",
			fmt.Sprintf("the new services' lanes need an mbuf pool of %d; the running pool has %d and cannot grow while the daemon runs: restart to apply this, or set mempool.mbufs", plan.PoolSize, d.pool.Size())))
	}

	n := len(cfg.Services)
	svcs := make([]*dispatch.Service, n)
	counts := make([][]*consumer.Counts, n)
	owned := make([]*dispatch.RingSet, n)
	kinds := make([]string, n)
	procs := make([]*consumer.Process, n)
	var added []*dispatch.Service
	for i, s := range cfg.Services {
		kinds[i] = s.Consumer.Type
		switch j := r.Kept[i]; {
		case j >= 0:
			svcs[i], counts[i], owned[i], procs[i] = d.services[j], d.counts[j], d.owned[j], d.procs[j]
			st.Kept++
		case slices.Contains(r.Rebuilt, i):
			svcs[i] = &dispatch.Service{Name: s.Name} // closed until step 3
			st.Rebuilt++
		default:
			b, err := d.newService(cfg, i)
			if err != nil {
				for _, a := range added {
					d.retire(a)
				}
				return st, fmt.Errorf("%w: service %s: %w", ErrReloadRefused, s.Name, err)
			}
			svcs[i], counts[i], owned[i], procs[i] = b.svc, b.counts, b.owned, b.proc
			added = append(added, b.svc)
			st.Added++
		}
	}
	var retiring []retiree
	for _, j := range r.Retired {
		retiring = append(retiring, retiree{svc: d.services[j], owner: old.Owner(old.Services[j].Name)})
	}
	st.Removed = len(r.Retired) - len(r.Rebuilt)

	// 1. New rules and services; the retired ones drain.
	if err := d.rewire(cfg, plan.Classifier, svcs, retiring, true); err != nil {
		return st, err
	}
	d.commit(plan, svcs, counts, owned, kinds, procs)
	if len(retiring) == 0 && len(r.Rebuilt) == 0 && !r.KernelChanged {
		st.Took = time.Since(start)
		return st, nil
	}
	deadline := time.Now().Add(cfg.Shutdown.DrainTimeout)
	for queued(retiring) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
	}

	// 2. Nothing runs the retired services or, if it changes, the
	// kernel path.
	if err := d.rewire(cfg, plan.Classifier, svcs, nil, !r.KernelChanged); err != nil {
		return st, err
	}
	for _, x := range retiring {
		st.Freed += d.retire(x.svc)
	}
	if st.Freed > 0 {
		d.log.Warn("reload: drain timeout; freed packets left in retired lanes", "packets", st.Freed)
	}

	// 3. The rebuilt services' new lanes, and the kernel path.
	final := slices.Clone(svcs)
	counts = slices.Clone(counts)
	owned = slices.Clone(owned)
	var errs []error
	for _, i := range r.Rebuilt {
		b, err := d.newService(cfg, i)
		if err != nil {
			// Its packets stay dropped (counted) until a reload succeeds.
			errs = append(errs, fmt.Errorf("daemon: reload: service %s stays closed: %w", cfg.Services[i].Name, err))
			continue
		}
		final[i], counts[i], owned[i] = b.svc, b.counts, b.owned
	}
	if r.KernelChanged && d.kernel != nil {
		var sets []*dispatch.RingSet
		for _, i := range cfg.KernelServices() {
			if owned[i] != nil {
				sets = append(sets, owned[i])
			}
		}
		if err := d.kernel.consumer.Rewire(sets); err != nil {
			errs = append(errs, err)
		}
		k := 0
		for _, i := range cfg.KernelServices() {
			if owned[i] != nil {
				counts[i] = []*consumer.Counts{&d.kernel.consumer.Services[k]}
				k++
			}
		}
	}
	if err := d.rewire(cfg, plan.Classifier, final, nil, true); err != nil {
		return st, errors.Join(append(errs, err)...)
	}
	for _, i := range r.Rebuilt {
		// What the closed placeholder dropped shows as the service's
		// drops; the loops published it when they left it.
		if c := svcs[i]; final[i] != c {
			st.Closed += c.Stats.Drops.Load()
			final[i].Stats.Drops.Add(c.Stats.Drops.Load())
		}
	}
	d.commit(plan, final, counts, owned, kinds, procs)
	st.Took = time.Since(start)
	return st, errors.Join(errs...)
}

// retiree is a service a reload retires, and the poll loop that owned
// its single consumer (-1: local consumers, on every receiving loop).
type retiree struct {
	svc   *dispatch.Service
	owner int
}

func queued(rs []retiree) int {
	n := 0
	for _, x := range rs {
		n += x.svc.Queued()
	}
	return n
}

// rewire hands every poll loop its table for cfg and services, with the
// retiring services' consumers, and waits until all have adopted it;
// then it frees the tables they left.
func (d *Daemon) rewire(cfg *config.Config, cls *classify.Classifier, services []*dispatch.Service, retiring []retiree, kernelTask bool) error {
	gens := make([]uint64, len(d.pollers))
	for pi, p := range d.pollers {
		pcfg := d.pollerConfig(cfg, pi, cls, services, kernelTask)
		for _, x := range retiring {
			if x.owner < 0 || x.owner == pi {
				pcfg.Retiring = append(pcfg.Retiring, x.svc)
			}
		}
		gen, err := p.Rewire(pcfg)
		if err != nil {
			// Loops before this one run the new table: the services
			// both reference stay allocated, so nothing breaks, but
			// the reload is half done.
			return fmt.Errorf("daemon: reload: poll loop on lcore %d: %w", p.Lcore(), err)
		}
		gens[pi] = gen
	}
	deadline := time.Now().Add(adoptTimeout)
	for pi, p := range d.pollers {
		for !p.Adopted(gens[pi]) {
			if time.Now().After(deadline) {
				// The old tables stay allocated: freeing what a stuck
				// loop may still use would be worse than the leak.
				return fmt.Errorf("daemon: reload: poll loop on lcore %d did not take the new configuration within %v", p.Lcore(), adoptTimeout)
			}
			time.Sleep(20 * time.Microsecond)
		}
		p.FreeRetired()
	}
	return nil
}

// retire frees a service no poll loop runs any more and forgets its
// ring sets. It returns the packets freed from its lanes.
func (d *Daemon) retire(svc *dispatch.Service) int {
	sets := d.setsOf[svc]
	delete(d.setsOf, svc)
	d.sets = slices.DeleteFunc(d.sets, func(s *dispatch.RingSet) bool { return slices.Contains(sets, s) })
	return d.closeService(svc, sets)
}

// commit publishes what a reload built to Snapshot's readers.
func (d *Daemon) commit(plan *Plan, services []*dispatch.Service, counts [][]*consumer.Counts, owned []*dispatch.RingSet, kinds []string, procs []*consumer.Process) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plan, d.services, d.counts, d.owned, d.kinds, d.procs = plan, services, counts, owned, kinds, procs
}
