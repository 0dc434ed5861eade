"""The ascend backend: Ascend C kernels built with CANN (bisheng direct launch, or msopgen custom ops),
verified through torch_npu and timed with NPU events. Importing this package never imports torch_npu."""
