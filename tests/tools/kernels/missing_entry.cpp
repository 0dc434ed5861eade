// Defines the kernel under another name, so the library lacks ks_kernel.
extern "C" int my_kernel(void) { return 0; }
