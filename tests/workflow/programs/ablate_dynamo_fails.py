"""Fails already in Dynamo: data-dependent control flow (a graph break) inside a
fullgraph=True compile. Every backend fails the same way; without torch.compile it runs."""

import torch


def clip_if_positive(x):
    if x.sum() > 0:  # planted: a graph break, and fullgraph=True forbids it
        return x.clamp(max=1.0)
    return x


compiled = torch.compile(clip_if_positive, fullgraph=True)
print(f"sum={compiled(torch.ones(4, 4)).sum().item():.4f}")
