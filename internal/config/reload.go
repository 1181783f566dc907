package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Live reload (SIGHUP): the daemon validates the new file as at start
// (Parse, CheckHost: one validator per setting), then CheckReload says
// what it may change without a restart. Live are the classification
// rules, default_service, the services (added, removed, rebuilt, their
// priorities), which poll loop drains an owned service
// (pollers[].services) and shutdown. Everything that shapes the EAL,
// the port, the mbuf pool, the poll loops themselves or the single
// objects built once (the RoCE endpoint, the kernel interface, the
// metrics listener, the logger) is fixed: a change there is refused,
// naming the setting, and the running configuration stays.

// fixedSettings are the top-level settings a reload may not change;
// pollers are checked per field (fixedPollerFields).
var fixedSettings = []string{"eal", "port", "mempool", "burst_size", "roce", "kernel", "metrics", "log"}

// Reload is what CheckReload found a reload to change.
type Reload struct {
	// Kept maps each new service to the old service it keeps as it runs
	// (lanes, consumers, counters), or -1: a service that is new, or
	// rebuilt because its lanes or consumer changed.
	Kept []int
	// Retired are the old services whose lanes and consumers go:
	// removed ones, and the old versions of rebuilt ones.
	Retired []int
	// Rebuilt are the new services that replace an old one of the same
	// name (ring_size, consumer or owning poll loop changed): their
	// packets are dropped between the old lanes' retirement and the new
	// ones, briefly.
	Rebuilt []int
	// KernelChanged reports that the services the kernel exception path
	// drains, or their priority order, changed.
	KernelChanged bool
}

// CheckReload compares the running configuration old with a validated
// new one. It refuses, with every offending setting and its line in the
// new file, a change to a setting that needs a restart, and otherwise
// says which services stay, go and are rebuilt.
func CheckReload(old, new *Config) (*Reload, error) {
	var errs []error
	refuse := func(path string, why string) {
		errs = append(errs, new.problem(path, why))
	}
	fixed := "cannot change while the daemon runs; restart it to apply this"
	// Services of a Fixed kind stay as long as the daemon runs.
	processFixed := "cannot be added, removed or changed while the daemon runs (a service process attaches to its rings by name); restart it to apply this"
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem()
	for _, name := range fixedSettings {
		i := yamlField(ov.Type(), name)
		for _, p := range diffPaths(name, ov.Field(i), nv.Field(i)) {
			refuse(p, fixed)
		}
	}
	if len(old.Pollers) != len(new.Pollers) {
		refuse("pollers", fmt.Sprintf("%d poll loops instead of %d: poll loops %s", len(new.Pollers), len(old.Pollers), fixed))
	} else {
		for i := range old.Pollers {
			o, n := old.Pollers[i], new.Pollers[i]
			if o.Lcore != n.Lcore {
				refuse(fmt.Sprintf("pollers[%d].lcore", i), fixed)
			}
			if !slices.Equal(o.RxQueues, n.RxQueues) {
				refuse(fmt.Sprintf("pollers[%d].rx_queues", i), fixed)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	r := &Reload{Kept: make([]int, len(new.Services))}
	reused := make([]bool, len(old.Services))
	for i, s := range new.Services {
		r.Kept[i] = -1
		j := old.ServiceIndex(s.Name)
		if j < 0 {
			if fixedKind(s) {
				refuse(fmt.Sprintf("services[%d]", i), "a new service with a process consumer "+processFixed)
			}
			continue
		}
		if sameLanes(old, j, new, i) {
			r.Kept[i], reused[j] = j, true
			continue
		}
		r.Rebuilt = append(r.Rebuilt, i)
		if rs := new.RoCE; rs != nil && rs.Service == s.Name {
			refuse(fmt.Sprintf("services[%d]", i), "the RoCE endpoint's service "+fixed)
		}
		if fixedKind(s) || fixedKind(old.Services[j]) {
			refuse(fmt.Sprintf("services[%d]", i), "a service with a process consumer "+processFixed)
		}
	}
	for j := range old.Services {
		if !reused[j] {
			r.Retired = append(r.Retired, j)
			if fixedKind(old.Services[j]) && new.ServiceIndex(old.Services[j].Name) < 0 {
				refuse("services", "removing "+old.Services[j].Name+", a service with a process consumer, "+processFixed)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.KernelChanged = !slices.Equal(kernelNames(old), kernelNames(new))
	for _, i := range new.KernelServices() {
		if r.Kept[i] < 0 {
			r.KernelChanged = true
		}
	}
	return r, nil
}

// fixedKind reports whether service s is of a kind a reload may not
// add, remove or change.
func fixedKind(s Service) bool {
	k := s.Kind()
	return k != nil && k.Traits().Fixed
}

// sameLanes reports whether new service i can keep old service j as it
// runs: same ring size, same consumer, run the same way by the same poll
// loop. Its priority may differ (the kernel path's order is rewired).
func sameLanes(old *Config, j int, new *Config, i int) bool {
	o, n := old.Services[j], new.Services[i]
	owner := func(c *Config, name string) int {
		if p := c.Owner(name); p >= 0 {
			return c.Pollers[p].Lcore
		}
		return -1
	}
	return o.RingSize == n.RingSize && o.Consumer == n.Consumer &&
		old.IsLocal(j) == new.IsLocal(i) && owner(old, o.Name) == owner(new, n.Name)
}

// kernelNames returns the kernel services in drain order.
func kernelNames(c *Config) []string {
	var names []string
	for _, i := range c.KernelServices() {
		names = append(names, c.Services[i].Name)
	}
	return names
}

// yamlField returns the index of the field of struct type t that has
// the YAML key name.
func yamlField(t reflect.Type, name string) int {
	for i := range t.NumField() {
		if key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); key == name {
			return i
		}
	}
	panic("config: no field with YAML key " + name)
}

// diffPaths returns the dotted paths (as Line takes them) of the
// settings that differ between a and b, as deep as the YAML keys go.
func diffPaths(path string, a, b reflect.Value) []string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{path}
			}
			return nil
		}
		return diffPaths(path, a.Elem(), b.Elem())
	case reflect.Struct:
		var out []string
		keyed := false
		for i := range a.NumField() {
			key, _, _ := strings.Cut(a.Type().Field(i).Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			keyed = true
			out = append(out, diffPaths(path+"."+key, a.Field(i), b.Field(i))...)
		}
		if !keyed && !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return []string{path} // a value type such as Prefix
		}
		return out
	case reflect.Slice:
		if a.Len() != b.Len() {
			return []string{path}
		}
		var out []string
		for i := range a.Len() {
			out = append(out, diffPaths(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))...)
		}
		return out
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return []string{path}
	}
	return nil
}

// Problem returns an error about the setting at path, with its line.
func (c *Config) Problem(path, msg string) error { return c.problem(path, msg) }
