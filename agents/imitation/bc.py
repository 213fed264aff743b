"""Behaviour cloning: fit a Gaussian policy's action mean to the labelled targets.

The loss is the mean squared error of the policy's deterministic action (its
distribution's mean) against each recorded row's targets, each family and
scenario weighing the same whatever its number of rows. The mixing entries are
fitted on every row; the residual entries only on the rows whose residual is
fitted (the plans, and the held bases, :mod:`agents.imitation.dataset`). Without
any such row the residual's rows of the action layer are zeroed and stay zero,
so that the policy's mean residual is exactly 0 and a base it picks runs as that
heuristic does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agents.imitation.dataset import Chunk

__all__ = ["fit_targets", "targets_loss"]


def _squared_error(mean: Any, y: Any, cols: slice) -> Any:
    """Each row's mean squared error of the action mean against its targets over ``cols``."""
    import torch

    return torch.mean((mean[:, cols] - y[:, cols]) ** 2, dim=1)


def fit_targets(
    policy: Any,
    parts: Sequence[Sequence[Chunk]],
    mixing: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    on_epoch: Callable[[], None] | None = None,
) -> float:
    """Fit ``policy``'s action mean to the targets of ``parts`` (per family or scenario, its
    ``(obs, targets, fit_residual)`` chunks; each family or scenario weighing the same) by
    mean squared error: the mixing entries (the last ``mixing``) on every row, the residual
    entries on the rows whose ``fit_residual`` is nonzero (weighted by it). ``epochs``
    passes of Adam (``learning_rate``) over minibatches of ``batch_size`` rows, shuffled by
    a generator seeded with ``seed``; ``on_epoch`` is called after each pass. Without any
    residual row the residual's rows of the action layer are zero and stay so (the
    policy's mean residual is exactly 0). Returns the loss over the last pass: the mean of
    its minibatches' losses, each weighing as its rows' weights do (so the whole data set
    weighs as the loss weighs it, not one minibatch)."""
    import torch

    device = policy.device
    chunks = [(o, t, f, sum(len(c) for c, _, _ in job)) for job in parts for o, t, f in job]
    x = torch.as_tensor(np.concatenate([c[0] for c in chunks]), device=device)
    y = torch.as_tensor(np.concatenate([c[1] for c in chunks]), device=device)
    fit_res = torch.as_tensor(np.concatenate([c[2] for c in chunks]), device=device)
    w = torch.as_tensor(
        np.concatenate([np.full(len(c[0]), 1.0 / c[3], np.float32) for c in chunks]),
        device=device,
    )
    head = policy.action_net
    residual = int(policy.action_space.shape[0]) - mixing
    with_residual = bool(fit_res.any())
    if not with_residual and hasattr(head, "zero_rows"):  # agents.networks.TenantHead
        head.zero_rows(residual)
    elif not with_residual:
        with torch.no_grad():  # the mean residual is exactly 0: each picked base runs as it is
            head.weight[:residual] = 0.0
            head.bias[:residual] = 0.0
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    gen = torch.Generator().manual_seed(seed)
    loss_value = float("nan")
    policy.set_training_mode(True)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        pass_loss = pass_weight = 0.0
        for i in range(0, len(x), batch_size):
            b = perm[i : i + batch_size]
            mean, yb = policy.get_distribution(x[b]).distribution.mean, y[b]
            err = _squared_error(mean, yb, slice(residual, None))
            if with_residual:
                err = err + fit_res[b] * _squared_error(mean, yb, slice(None, residual))
            weight = torch.sum(w[b])
            loss = torch.sum(w[b] * err) / weight
            opt.zero_grad()
            loss.backward()
            opt.step()  # Adam leaves zero rows alone: their gradient is 0
            pass_loss += float(loss.detach()) * float(weight)
            pass_weight += float(weight)
        loss_value = pass_loss / pass_weight if pass_weight > 0 else float("nan")
        if on_epoch is not None:
            on_epoch()
    policy.set_training_mode(False)
    return loss_value


def targets_loss(
    policy: Any, parts: Sequence[Sequence[Chunk]], mixing: int
) -> tuple[float, float, float]:
    """The loss :func:`fit_targets` minimises, of ``policy`` on ``parts`` as they are (each
    family or scenario weighing the same): ``(total, mixing entries, residual entries)``,
    the total the sum of the two."""
    import torch

    residual = int(policy.action_space.shape[0]) - mixing
    mix = res = 0.0
    with torch.no_grad():
        for job in parts:
            rows = sum(len(o) for o, _, _ in job)
            for obs, y, fit in job:
                dist = policy.get_distribution(torch.as_tensor(obs, device=policy.device))
                mean, yt = dist.distribution.mean, torch.as_tensor(y, device=policy.device)
                fit_t = torch.as_tensor(fit, device=policy.device)
                mix += float(torch.sum(_squared_error(mean, yt, slice(residual, None)))) / rows
                err = _squared_error(mean, yt, slice(None, residual))
                res += float(torch.sum(fit_t * err)) / rows
    n = max(len(parts), 1)
    return (mix + res) / n, mix / n, res / n
