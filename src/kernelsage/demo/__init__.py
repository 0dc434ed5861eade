"""The offline demo: a small stream on the CPU backend with the model's answers replayed from a recording."""
