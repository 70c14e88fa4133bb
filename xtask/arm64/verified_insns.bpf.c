// SPDX-License-Identifier: GPL-2.0
/*
 * A bpf_prog iterator for `cargo xtask arm64-verify`: one line per loaded
 * program, "ID VERIFIED_INSNS". No bpftool prints the verifier's count, and
 * the arm64 guest has nothing else to ask the kernel for it with.
 * Self-contained (no libbpf headers): vmlinux.h's types are CO-RE
 * relocatable, and one helper is declared here.
 */
#include "vmlinux.h"

#define SEC(name) __attribute__((section(name), used))

/* BPF_FUNC_seq_printf */
static long (*bpf_seq_printf)(struct seq_file *m, const char *fmt, __u32 fmt_size, const void *data,
			      __u32 data_len) = (void *)126;

char LICENSE[] SEC("license") = "GPL";

SEC("iter/bpf_prog")
int verified_insns(struct bpf_iter__bpf_prog *ctx)
{
	static const char format[] = "%u %u\n";
	struct bpf_prog *prog = ctx->prog;
	__u64 values[2];

	if (!prog)
		return 0;
	values[0] = prog->aux->id;
	values[1] = prog->aux->verified_insns;
	bpf_seq_printf(ctx->meta->seq, format, sizeof(format), values, sizeof(values));
	return 0;
}
