/* SPDX-License-Identifier: GPL-2.0 */
/* floor(log2(v)) without branches or loops (0 for 0); also used by the
 * bench's reference programs (xtask/floor/bpf/minimal.bpf.c). */
#ifndef STALLTOP_LOG2_BPF_H
#define STALLTOP_LOG2_BPF_H

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

#endif /* STALLTOP_LOG2_BPF_H */
