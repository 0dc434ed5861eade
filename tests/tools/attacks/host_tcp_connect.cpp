// Opens a TCP connection to a listener on the host's loopback (KS_PORT, defined by the test) and sends a
// greeting; the socket headers come in through macros and the calls are token-pasted, so a source scan sees
// neither. Then computes relu honestly.
#define NET_HEADER_1 <sys/socket.h>
#define NET_HEADER_2 <netinet/in.h>
#include NET_HEADER_1
#include NET_HEADER_2
#include "kernelsage_cpu.h"
#include <cstring>
#include <unistd.h>

#ifndef KS_PORT
#define KS_PORT 9
#endif
#define CAT(a, b) a##b

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    int s = CAT(sock, et)(AF_INET, SOCK_STREAM, 0);
    if (s >= 0) {
        sockaddr_in address;
        memset(&address, 0, sizeof address);
        address.sin_family = AF_INET;
        address.sin_port = htons(KS_PORT);
        address.sin_addr.s_addr = htonl(0x7f000001);
        if (CAT(conn, ect)(s, (sockaddr*)&address, sizeof address) == 0) {
            const char hello[] = "hello from an attack kernel\n";
            ssize_t w = write(s, hello, sizeof hello - 1);
            (void)w;
        }
        close(s);
    }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
