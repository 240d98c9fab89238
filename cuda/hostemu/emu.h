// emu.h: a minimal host emulation of the CUDA features that cuda/rff.cu uses, so its kernels can
// be compiled with g++ and run on a machine without a GPU (scripts/emu-cuda.sh).
//
// Each CUDA thread is a std::thread, __syncthreads() is a std::barrier over the block, warp
// shuffles go through a per-warp barrier, __shared__ variables are function statics (blocks run
// one after another), __ldg is a plain load. It checks indexing, tiling, partial tiles and
// barrier placement (build with -fsanitize=thread to catch a missing barrier as a data race);
// it says nothing about performance, bank conflicts, CUDA's own libm, or the memory model beyond
// what the barriers give. Extend it when a kernel starts using a new CUDA feature.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <thread>
#include <vector>
#include <memory>
using std::min; using std::max;
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* g_bar = nullptr;
inline std::barrier<>* g_warp_bar[32];
inline double g_warp_scratch[32][32];
#define __syncthreads() g_bar->arrive_and_wait()
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
template <class T> T __ldg(const T* p) { return *p; }
inline double __shfl_xor_sync(unsigned, double v, int mask) {
    int t = threadIdx.x, w = t / 32, l = t % 32;
    g_warp_scratch[w][l] = v;
    g_warp_bar[w]->arrive_and_wait();
    double r = g_warp_scratch[w][l ^ mask];
    g_warp_bar[w]->arrive_and_wait();
    return r;
}
template <class F>
void launch(F f, dim3 grid, dim3 block) {
    gridDim = grid; blockDim = block;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = {bx, by, 1};
            std::barrier<> bar(block.x);
            g_bar = &bar;
            std::vector<std::unique_ptr<std::barrier<>>> wb;
            for (unsigned w = 0; w < (block.x + 31) / 32; ++w) { wb.emplace_back(new std::barrier<>(32)); g_warp_bar[w] = wb.back().get(); }
            std::vector<std::thread> th;
            for (unsigned t = 0; t < block.x; ++t) th.emplace_back([&, t] { threadIdx = {t, 1, 1}; f(); });
            for (auto& x : th) x.join();
        }
}
