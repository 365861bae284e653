"""Runs everywhere but prints different numbers under Inductor: dropout-like noise drawn inside
the compiled function. Inductor generates its own random numbers unless
torch._inductor.config.fallback_random is set, so its output differs from eager's."""

import torch


def noisy(x):
    return x + torch.rand_like(x)


torch.manual_seed(0)
x = torch.zeros(2, 3)
torch.manual_seed(1)
print(f"noise: {torch.compile(noisy)(x).flatten().tolist()}")
