// A library larger than the file-size limit (an initialised array of KS_BLOB_MIB MiB): the assembler or the
// linker is stopped by the limit. The build must end as the candidate's failure, with nothing left behind.
#include "kernelsage_cpu.h"

#ifndef KS_BLOB_MIB
#define KS_BLOB_MIB 320
#endif

static volatile char blob[(unsigned long)KS_BLOB_MIB << 20] = {1};

int ks_kernel(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int) { return blob[12345]; }
