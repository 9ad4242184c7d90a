// SPDX-License-Identifier: MIT
//
// matmul.cu - a tiled single-precision matrix multiply, C = A B (row-major;
// A is M x K, B is K x N), built into variants by two macros:
//
//   TILE  the edge of the square output tile one block computes, and of the
//         A and B tiles it stages in shared memory;
//   WPT   outputs per thread, down a column of the tile: a block has
//         TILE x (TILE / WPT) threads, each keeping WPT accumulators, so a
//         larger WPT trades threads for registers and reuse of each B value.
//
// Edges are guarded, so any M, N, K work.  Shared rows are padded by one
// float to keep the column reads of As free of bank conflicts.

#ifndef TILE
#define TILE 16
#endif
#ifndef WPT
#define WPT 1
#endif
#define RTS (TILE / WPT)

extern "C" __global__ void envlog_matmul(const float *__restrict__ A,
                                         const float *__restrict__ B,
                                         float *__restrict__ C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int col = blockIdx.x * TILE + tx;
    const int row0 = blockIdx.y * TILE + ty;
    float acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; w++)
        acc[w] = 0.0f;
    for (int t = 0; t < K; t += TILE) {
#pragma unroll
        for (int w = 0; w < WPT; w++) {
            const int r = ty + w * RTS;
            const int arow = blockIdx.y * TILE + r;
            const int acol = t + tx;
            As[r][tx] = (arow < M && acol < K) ? A[(long long)arow * K + acol] : 0.0f;
            const int brow = t + r;
            Bs[r][tx] = (brow < K && col < N) ? B[(long long)brow * N + col] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TILE; kk++) {
            const float b = Bs[kk][tx];
#pragma unroll
            for (int w = 0; w < WPT; w++)
                acc[w] += As[ty + w * RTS][kk] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int w = 0; w < WPT; w++) {
        const int row = row0 + w * RTS;
        if (row < M && col < N)
            C[(long long)row * N + col] = acc[w];
    }
}
