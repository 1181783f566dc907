/* The interrupt-thread gate (gate_cgo.go): its state, shared with Go. */
#ifndef CDD_GATE_H
#define CDD_GATE_H

/* Since 21.11 an interrupt handle is opaque, and in 22.11 the calls that
 * build one are still experimental. */
#define ALLOW_EXPERIMENTAL_API
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <rte_alarm.h>
#include <rte_interrupts.h>
#include <rte_pause.h>
#include "cdd.h"

#define CDD_GATE_SLOTS 128
#define CDD_GATE_SPIN_NS 200000 /* a long iteration: a full burst through every consumer */
#define CDD_GATE_NAP_NS 20000

/* A slot is one poll loop's last report: the gate epoch it saw at the top
 * of an iteration, UINT64_MAX while it does not poll; and when it first
 * found itself held in the current hold (CLOCK_MONOTONIC ns). */
struct cdd_gate_slot {
	uint64_t seen;
	uint64_t held_at;
} __rte_cache_aligned;

struct cdd_gate {
	uint32_t run; /* loops may touch ports: the interrupt thread is parked */
	uint32_t stop; /* Close: park no more */
	uint64_t epoch;
	uint64_t period_ns;
	/* Written by the interrupt thread only. */
	uint64_t windows, wait_ns, max_wait_ns, held_ns, max_held_ns;
	uint64_t hold_t; /* when the current hold began */
	uint64_t acked_at; /* when the last loop reported, in an open window */
	int efd;
	struct rte_intr_handle *ih;
	struct cdd_gate_slot slot[CDD_GATE_SLOTS];
};

/* A probe is an alarm callback, run on the interrupt thread like any
 * other source's, that records what the gate looks like from there. */
struct cdd_gate_probe {
	struct cdd_gate *g;
	uint32_t done;
	uint32_t run; /* the loops' run flag */
	uint32_t unheld; /* loops online that have not seen the hold */
};

struct cdd_gate *cdd_gate_new(uint64_t period_ns, int *err);
int cdd_gate_free(struct cdd_gate *g);
int cdd_gate_probe_set(struct cdd_gate_probe *p);
int cdd_gate_probe_done(struct cdd_gate_probe *p);
void cdd_gate_stats(struct cdd_gate *g, uint64_t out[5]);

#endif
