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
	start := time.Now()
	cfg := plan.Config
	r, err := d.checkReload(plan)
	if err != nil {
		return ReloadStats{}, err
	}
	t, st, err := d.stage(cfg, r)
	if err != nil {
		return st, err
	}
	retiring := d.retiring(r)
	st.Removed = len(r.Retired) - len(r.Rebuilt)

	// 1. New rules and services; the retired ones drain.
	if err := d.rewire(cfg, plan.Classifier, t.services, retiring, true); err != nil {
		return st, err
	}
	d.commit(plan, t)
	if len(retiring) == 0 && len(r.Rebuilt) == 0 && !r.KernelChanged {
		st.Took = time.Since(start)
		return st, nil
	}
	drain(ctx, retiring, cfg.Shutdown.DrainTimeout)

	// 2. Nothing runs the retired services or, if it changes, the
	// kernel path.
	if err := d.rewire(cfg, plan.Classifier, t.services, nil, !r.KernelChanged); err != nil {
		return st, err
	}
	st.Freed = d.retireAll(retiring)

	// 3. The rebuilt services' new lanes, and the kernel path.
	final, errs := d.rebuild(cfg, r, t)
	if err := d.rewire(cfg, plan.Classifier, final.services, nil, true); err != nil {
		return st, errors.Join(append(errs, err)...)
	}
	st.Closed = carryDrops(t.services, final.services, r.Rebuilt)
	d.commit(plan, final)
	st.Took = time.Since(start)
	return st, errors.Join(errs...)
}

// checkReload refuses a reload that config.CheckReload refuses, that
// needs a larger pool than the running one, or that finds the poll
// loops driven by hand.
func (d *Daemon) checkReload(plan *Plan) (*config.Reload, error) {
	if d.manual {
		return nil, fmt.Errorf("daemon: %w: the poll loops are driven by hand", ErrReloadRefused)
	}
	r, err := config.CheckReload(d.plan.Config, plan.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReloadRefused, err)
	}
	if err := checkPool(plan, d.pool.Size()); err != nil {
		return nil, err
	}
	return r, nil
}

// checkPool refuses a plan whose pool is larger than the running one,
// of size have.
func checkPool(plan *Plan, have int) error {
	if plan.PoolSize <= have {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrReloadRefused, plan.Config.Problem("services",
		fmt.Sprintf("the new services' lanes need an mbuf pool of %d; the running pool has %d and cannot grow while the daemon runs: restart to apply this, or set mempool.mbufs", plan.PoolSize, have)))
}

// stage builds the table of step 1: kept services as they run, new ones
// built, rebuilt ones closed placeholders (until step 3). If building a
// new one fails, it frees the others built and refuses the reload.
func (d *Daemon) stage(cfg *config.Config, r *config.Reload) (serviceTable, ReloadStats, error) {
	var t serviceTable
	var st ReloadStats
	var added []*dispatch.Service
	for i, s := range cfg.Services {
		var b builtService
		switch j := r.Kept[i]; {
		case j >= 0:
			b = builtService{svc: d.services[j], counts: d.counts[j], owned: d.owned[j], proc: d.procs[j]}
			st.Kept++
		case slices.Contains(r.Rebuilt, i):
			b = builtService{svc: &dispatch.Service{Name: s.Name}} // closed until step 3
			st.Rebuilt++
		default:
			var err error
			if b, err = d.newService(cfg, i); err != nil {
				for _, a := range added {
					d.retire(a)
				}
				return t, st, fmt.Errorf("%w: service %s: %w", ErrReloadRefused, s.Name, err)
			}
			added = append(added, b.svc)
			st.Added++
		}
		t.add(b, s.Consumer.Type)
	}
	return t, st, nil
}

// retiring returns the services r retires, with the loops that own them.
func (d *Daemon) retiring(r *config.Reload) []retiree {
	old := d.plan.Config
	var out []retiree
	for _, j := range r.Retired {
		out = append(out, retiree{svc: d.services[j], owner: old.Owner(old.Services[j].Name)})
	}
	return out
}

// drain waits until the retiring services' lanes are empty, ctx ends or
// timeout passes.
func drain(ctx context.Context, retiring []retiree, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for queued(retiring) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
	}
}

// retireAll frees the retired services, which no loop runs any more,
// and returns the packets left in their lanes.
func (d *Daemon) retireAll(retiring []retiree) int {
	freed := 0
	for _, x := range retiring {
		freed += d.retire(x.svc)
	}
	if freed > 0 {
		d.log.Warn("reload: drain timeout; freed packets left in retired lanes", "packets", freed)
	}
	return freed
}

// rebuild builds the final table of step 3 from t: the rebuilt services'
// new lanes and consumers, and the kernel path over its new services. A
// service that fails to build stays closed; its error is returned.
func (d *Daemon) rebuild(cfg *config.Config, r *config.Reload, t serviceTable) (serviceTable, []error) {
	final := serviceTable{
		services: slices.Clone(t.services), counts: slices.Clone(t.counts), owned: slices.Clone(t.owned),
		kinds: t.kinds, procs: t.procs,
	}
	var errs []error
	for _, i := range r.Rebuilt {
		b, err := d.newService(cfg, i)
		if err != nil {
			// Its packets stay dropped (counted) until a reload succeeds.
			errs = append(errs, fmt.Errorf("daemon: reload: service %s stays closed: %w", cfg.Services[i].Name, err))
			continue
		}
		final.services[i], final.counts[i], final.owned[i] = b.svc, b.counts, b.owned
	}
	if r.KernelChanged && d.kernel != nil {
		if err := d.rewireKernel(cfg, &final); err != nil {
			errs = append(errs, err)
		}
	}
	return final, errs
}

// rewireKernel points the kernel path at t's kernel services that run,
// in priority order, and their counts at its counters.
func (d *Daemon) rewireKernel(cfg *config.Config, t *serviceTable) error {
	var sets []*dispatch.RingSet
	for _, i := range cfg.KernelServices() {
		if t.owned[i] != nil {
			sets = append(sets, t.owned[i])
		}
	}
	err := d.kernel.consumer.Rewire(sets)
	k := 0
	for _, i := range cfg.KernelServices() {
		if t.owned[i] != nil {
			t.counts[i] = []*consumer.Counts{&d.kernel.consumer.Services[k]}
			k++
		}
	}
	return err
}

// carryDrops adds what each rebuilt service's closed placeholder (in
// staged) dropped to the drops of its new version (in final), which the
// loops published when they left it, and returns the sum.
func carryDrops(staged, final []*dispatch.Service, rebuilt []int) uint64 {
	var closed uint64
	for _, i := range rebuilt {
		if c := staged[i]; final[i] != c {
			closed += c.Stats.Drops.Load()
			final[i].Stats.Drops.Add(c.Stats.Drops.Load())
		}
	}
	return closed
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
func (d *Daemon) commit(plan *Plan, t serviceTable) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plan, d.serviceTable = plan, t
}
