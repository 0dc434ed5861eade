"""The triton backend: Python candidates launching @triton.jit kernels on interpret (CPU), cuda or npu."""
