# Borrowed compute, as a model would write it: refused before it runs.
import torch


def ks_kernel(inputs, outputs, attrs):
    outputs[0].copy_(torch.relu(inputs[0]))
