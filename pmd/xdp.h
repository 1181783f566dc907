#ifndef CDD_XDP_H
#define CDD_XDP_H

#include <stddef.h>

// cdd_xdp_attach loads a BPF object with libbpf and attaches its program
// prog to ifindex with flags (XDP_FLAGS_*), storing the program's id. It
// returns 0 or a negative errno; the program outlives the call only by
// being attached.
int cdd_xdp_attach(const void *obj, size_t len, const char *prog, int ifindex,
		   unsigned int flags, unsigned int *id);

#endif
