// SPDX-License-Identifier: MIT
//
// reduce.cu - a single-precision sum, built into variants by two macros:
//
//   BLOCK  threads per block (a multiple of 32, at most 1024);
//   IPT    items each thread adds before the block combines them.
//
// Each thread sums IPT items strided by BLOCK (coalesced), each warp
// combines with shuffles, the warps' sums meet in shared memory, and one
// atomicAdd per block adds the block's sum into out[0], which the caller
// zeroes first.  The order of the additions depends on the schedule, so the
// result matches a sequential sum only to rounding.

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef IPT
#define IPT 4
#endif

extern "C" __global__ void envlog_reduce_sum(const float *__restrict__ in,
                                             float *__restrict__ out, int n)
{
    __shared__ float warp_sums[BLOCK / 32];
    float s = 0.0f;
    const long long base = (long long)blockIdx.x * BLOCK * IPT + threadIdx.x;
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const long long j = base + (long long)i * BLOCK;
        if (j < n)
            s += in[j];
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0)
        warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : 0.0f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_down_sync(0xffffffffu, s, off);
        if (threadIdx.x == 0)
            atomicAdd(out, s);
    }
}
