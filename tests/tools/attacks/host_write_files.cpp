// Writes files outside its working directory: /tmp, the home directories, $KERNELSAGE_CACHE, and the
// directory of its own shared library and the one above it (the build cache). Then computes relu honestly,
// so nothing in the verdict gives it away. KS_MARKER names the files (the test defines it).
#include "kernelsage_cpu.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#define DL_HEADER <dlfcn.h>
#include DL_HEADER

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif

static void drop(const std::string& dir) {
    if (dir.empty()) return;
    std::string path = dir + "/" + KS_MARKER;
    if (FILE* f = fopen64(path.c_str(), "w")) { fputs("written by an attack kernel\n", f); fclose(f); }
}

static std::string dirname_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    drop("/tmp");
    drop("/var/tmp");
    drop("/dev/shm");
    drop("/root");
    if (const char* home = getenv("HOME")) drop(home);
    if (const char* cache = getenv("KERNELSAGE_CACHE")) { drop(cache); drop(std::string(cache) + "/cpu-builds"); }
    auto open_dir = opendir;
    if (DIR* d = open_dir("/home")) {
        while (dirent* e = readdir(d)) if (e->d_name[0] != '.') drop(std::string("/home/") + e->d_name);
        closedir(d);
    }
    Dl_info info;
    if (dladdr((void*)&ks_kernel, &info) && info.dli_fname) {
        std::string own = dirname_of(info.dli_fname);
        drop(own);
        drop(dirname_of(own));
        drop(dirname_of(dirname_of(own)));
    }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
