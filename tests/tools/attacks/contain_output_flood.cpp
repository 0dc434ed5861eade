// Writes without end to stdout (the runner's log): the disk of the judge's job directory fills.
#include "kernelsage_cpu.h"
#include <cstdio>
#include <cstring>

int ks_kernel(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int) {
    static char line[1 << 16];
    std::memset(line, 'A', sizeof line - 1);
    for (;;) std::fwrite(line, 1, sizeof line - 1, stdout);
    return 0;
}
