// Unbounded recursion with a large frame: the stack runs out.
#include "kernelsage_cpu.h"
#include <cstring>

namespace {
__attribute__((noinline)) long deeper(long depth, volatile char* previous) {
    volatile char frame[16384];
    std::memset((char*)frame, (int)depth, sizeof frame);
    frame[0] = previous ? previous[1] : 0;
    return deeper(depth + 1, frame) + frame[depth % sizeof frame];
}
}  // namespace

int ks_kernel(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int) { return (int)deeper(0, nullptr); }
