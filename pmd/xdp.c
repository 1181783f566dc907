#include <errno.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "xdp.h"

// libbpf, not a Go loader: libbpf loads the object's whole BTF into the
// kernel, and libxdp (which DPDK's net_af_xdp uses) adopts an attached
// program only if that BTF has its xdp_metadata section.
int cdd_xdp_attach(const void *obj, size_t len, const char *prog, int ifindex,
		   unsigned int flags, unsigned int *id)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "cdd_xdp_roce");
	struct bpf_object *o;
	struct bpf_program *p;
	struct bpf_prog_info info = {0};
	__u32 info_len = sizeof(info);
	int fd, ret;

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
	fd = bpf_program__fd(p);
	ret = bpf_obj_get_info_by_fd(fd, &info, &info_len);
	if (ret) {
		ret = -errno;
		goto out;
	}
	*id = info.id;
	ret = bpf_xdp_attach(ifindex, fd, flags, NULL);
out:
	bpf_object__close(o);
	return ret;
}
