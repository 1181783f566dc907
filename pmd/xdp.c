#include <errno.h>
#include <fcntl.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "xdp.h"

// libbpf, not a Go loader: libbpf loads the object's whole BTF into the
// kernel, and libxdp (which DPDK's net_af_xdp uses) adopts an attached
// program only if that BTF has its xdp_metadata section.
int cdd_xdp_load(const void *obj, size_t len, const char *prog, int *fd,
		 unsigned int *id)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "cdd_xdp_roce");
	struct bpf_object *o;
	struct bpf_program *p;
	struct bpf_prog_info info = {0};
	__u32 info_len = sizeof(info);
	int ret;

	o = bpf_object__open_mem(obj, len, &opts);
	ret = (int)libbpf_get_error(o);
	if (ret)
		return ret < 0 ? ret : -EINVAL;
	ret = bpf_object__load(o);
	if (ret)
		goto out;
	p = bpf_object__find_program_by_name(o, prog);
	if (!p) {
		ret = -ENOENT;
		goto out;
	}
	ret = bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &info_len);
	if (ret) {
		ret = -errno;
		goto out;
	}
	*id = info.id;
	// Closing the object closes its descriptors: the caller gets its
	// own, which keeps the program loaded until it is attached.
	*fd = fcntl(bpf_program__fd(p), F_DUPFD_CLOEXEC, 0);
	if (*fd < 0)
		ret = -errno;
out:
	bpf_object__close(o);
	return ret;
}
