"""Fails only under Inductor: its C++ compiler does not exist (a real Inductor config).
Dynamo, AOTAutograd and the decompositions never call a C++ compiler, so the other rungs pass."""

import torch
import torch._inductor.config

torch._inductor.config.cpp.cxx = ("/nonexistent/c++",)  # planted


def f(x, y):
    return torch.sin(x) * y + 1.0


x = torch.ones(4, 4)
print(f"sum={torch.compile(f)(x, x).sum().item():.4f}")
