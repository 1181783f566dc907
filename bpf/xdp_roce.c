// SPDX-License-Identifier: GPL-2.0
//
// The XDP program of cephdpdkd's af_xdp port mode: RoCEv2 (UDP 4791)
// addressed to the node's RoCE address goes to the AF_XDP socket of the
// queue it arrived on; every other frame goes on to the kernel stack.
//
// The daemon attaches it itself (native or generic mode), keeps it
// attached across restarts, and lets DPDK's net_af_xdp adopt it: libxdp
// (which the PMD uses to create its sockets) takes an attached program
// named xsk_def_prog with a map named xsks_map and an xsk_prog_version in
// its xdp_metadata section for its own default program, and fills the
// map with its sockets. The program has no refcount map of libxdp's
// (xsk_def_.data), so libxdp never detaches it when the sockets close:
// with the daemon gone, bpf_redirect_map finds no socket and passes the
// frame, and the node's own traffic never depends on the daemon.
//
// Built by scripts/build-bpf.sh (clang -target bpf); loaded with
// internal/xdp, which reads the counters and writes the configuration.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Keep in step with internal/xdp (Reason and its names).
enum reason {
	REDIRECTED = 0,  // to the queue's socket
	PASS_NOT_IPV4,   // ARP, IPv6, LLDP...: the kernel's
	PASS_NOT_ROCE,   // IPv4 but not UDP to 4791
	PASS_OTHER_ADDR, // RoCEv2 to another address of the node
	PASS_FRAGMENT,   // an IPv4 fragment (RoCEv2 never fragments)
	PASS_MALFORMED,  // too short for its headers
	PASS_NO_SOCKET,  // the queue has no socket: the daemon is gone
	PASS_UNCONFIGURED, // no RoCE address written yet
	NUM_REASONS,
};

#define ROCE_PORT 4791
#define MAX_QUEUES 256
#define MAX_VLAN_TAGS 2

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(key_size, sizeof(int));
	__uint(value_size, sizeof(int));
	__uint(max_entries, MAX_QUEUES);
} xsks_map SEC(".maps");

// cdd_config[0]: the RoCE address, in network byte order; 0 passes all.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} cdd_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, NUM_REASONS);
} cdd_stats SEC(".maps");

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

static __always_inline int count(__u32 reason, int action)
{
	__u64 *n = bpf_map_lookup_elem(&cdd_stats, &reason);

	if (n)
		*n += 1;
	return action;
}

// classify says what to do with one frame: REDIRECTED or a pass reason.
static __always_inline __u32 classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;
	__u32 key = 0, *addr;

	if ((void *)(eth + 1) > end)
		return PASS_MALFORMED;
	proto = eth->h_proto;
	l3 = eth + 1;
#pragma unroll
	for (int i = 0; i < MAX_VLAN_TAGS; i++) {
		struct vlan_hdr *vh = l3;

		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(vh + 1) > end)
			return PASS_MALFORMED;
		proto = vh->proto;
		l3 = vh + 1;
	}
	if (proto != bpf_htons(ETH_P_IP))
		return PASS_NOT_IPV4;

	struct iphdr *ip = l3;
	if ((void *)(ip + 1) > end)
		return PASS_MALFORMED;
	if (ip->version != 4 || ip->ihl < 5)
		return PASS_MALFORMED;
	if (ip->protocol != IPPROTO_UDP)
		return PASS_NOT_ROCE;
	if (ip->frag_off & bpf_htons(0x3fff))
		return PASS_FRAGMENT;

	struct udphdr *udp = l3 + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return PASS_MALFORMED;
	if (udp->dest != bpf_htons(ROCE_PORT))
		return PASS_NOT_ROCE;

	addr = bpf_map_lookup_elem(&cdd_config, &key);
	if (!addr || *addr == 0)
		return PASS_UNCONFIGURED;
	if (ip->daddr != *addr)
		return PASS_OTHER_ADDR;
	return REDIRECTED;
}

// The name is libxdp's for its default program: see the top of the file.
SEC("xdp")
int xsk_def_prog(struct xdp_md *ctx)
{
	__u32 reason = classify(ctx);

	if (reason != REDIRECTED)
		return count(reason, XDP_PASS);
	// XDP_PASS in the flags: what the kernel returns when the queue has
	// no socket.
	int action = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
	if (action == XDP_PASS)
		return count(PASS_NO_SOCKET, XDP_PASS);
	return count(REDIRECTED, action);
}

char _license[] SEC("license") = "GPL";

// libxdp reads this to accept the program as a default program it knows
// (xsk_def_xdp_prog.h's XSK_PROG_VERSION of libxdp 1.3).
__uint(xsk_prog_version, 1) SEC("xdp_metadata");
