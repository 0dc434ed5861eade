# Borrowed compute through a tensor method (no static rule can see its type), the refusal caught and hidden:
# the runner remembers the refusal outside the candidate's reach.
def ks_kernel(inputs, outputs, attrs):
    try:
        outputs[0].copy_(inputs[0].relu())
    except RuntimeError:
        outputs[0].copy_(inputs[0].clamp(min=0))
