// Launch latency: a kernel that does nothing. Timed three ways on the host side
// (rooflab/cuda/suite.py): enqueue only (N launches back to back, host time / N), round trip
// (launch + synchronize), and CUDA-graph replay of N captured launches (device time / N).
// Typical figures: 2-5 us enqueue through cupy, ~2 us per node in a graph on H100-class parts.
#include "common.cuh"

extern "C" __global__ void empty_kernel(int* __restrict__ flag) {
    if (flag != nullptr && threadIdx.x == 0 && blockIdx.x == 0 && *flag == 12345) *flag = 0;
}

// The launch family (rooflab/families/launch/cuda.py): the same do-nothing kernel, but countable.
// With a null counter it is empty (what is timed); with a counter, every launch adds 1 (what the
// verification checks: N launches, graph replays of N nodes, a freshly loaded module's launch).
extern "C" __global__ void launch_tick(unsigned int* __restrict__ counter) {
    if (counter != nullptr && threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(counter, 1u);
}
