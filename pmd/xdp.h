#ifndef CDD_XDP_H
#define CDD_XDP_H

#include <stddef.h>

// cdd_xdp_load loads a BPF object with libbpf and returns a descriptor of
// its program prog (close-on-exec) and the program's id. It returns 0 or
// a negative errno; the program lives as long as the descriptor, or
// whatever attachment is made of it.
int cdd_xdp_load(const void *obj, size_t len, const char *prog, int *fd,
		 unsigned int *id);

#endif
