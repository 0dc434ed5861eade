/* The mine backend's ABI: the cpu backend's entry point under another header (MINE-HEADER-MARK). */
#include "kernelsage_cpu.h"
