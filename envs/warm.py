"""Compiling ahead, split between processes that start together.

A fresh clone compiles the model on first use (about two minutes on one core, cached on
disk afterwards, :mod:`envs.jit`); half of it is the solver's kernel
(:func:`envs.solver._solve_batch`), which every environment calls first (its reset
computes each tenant's bandwidth alone). Processes that start together (the test suite's
workers, the imitation phase's labelling workers) meet the compiled functions in the same
order, so :mod:`envs.jit`'s lock alone only makes them take turns. Split in two parts that
share no function, the compile runs on two cores at once:

- :func:`envs.solver.compile_kernel`: the solver's kernel;
- :func:`compile_rest`: what a gym.make and a vector environment's reset and steps
  compile besides, run with the kernel's results stood in for by constants (the compiler
  sees only types, and every array the kernel fills is allocated by the same code as in a
  real step, so the signatures compiled are a real step's).

Each is a no-op where the cache already holds what it compiles (a load), and nothing that
either computes is kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

import envs.solver as solver
from envs.gym_env import ENV_ID
from envs.solver import compile_kernel

__all__ = ["compile_kernel", "compile_rest", "environment_steps"]


def _fill(out_t: Any, out_n: Any, out_l: Any, out_b: Any, iters: Any, lo: int, hi: int) -> None:
    """The kernel's outputs for elements ``lo .. hi - 1``, constants in range: 1 GB/s and
    100 ns per tenant, nodes half loaded, converged in one iteration."""
    out_t[0, :, lo:hi], out_t[1, :, lo:hi], out_t[2, :, lo:hi] = 1.0, 100.0, 1.0
    out_n[0, :, lo:hi], out_n[1:3, :, lo:hi], out_n[3:, :, lo:hi] = 100.0, 0.5, 1.0
    out_l[:, lo:hi], out_b[lo:hi], iters[lo:hi] = 0.0, 0.0, 1


def _stand_in(*args: Any) -> None:
    """:func:`envs.solver._solve_batch`'s stand-in (its arguments, outputs 9 to 13)."""
    _fill(args[9], args[10], args[11], args[12], args[13], args[15], args[16])


def _stand_in_chunks(*args: Any) -> None:
    """:func:`envs.solver._solve_chunks`'s stand-in: every element of the batch."""
    _fill(args[9], args[10], args[11], args[12], args[13], 0, args[0].shape[2])


@contextlib.contextmanager
def _kernel_stood_in() -> Iterator[None]:
    real = solver._solve_batch, solver._solve_chunks
    solver._solve_batch, solver._solve_chunks = _stand_in, _stand_in_chunks
    try:
        yield
    finally:
        solver._solve_batch, solver._solve_chunks = real


def environment_steps() -> None:
    """A ``gym.make`` instance of ``mixed`` and a vector environment of ``cxl-spill``
    (sockets, spill, reclaim), reset and stepped three times with random actions: what
    :func:`compile_rest` runs with the kernel stood in for."""
    single = gym.make(ENV_ID, scenario="mixed")
    single.reset(seed=0)
    single.action_space.seed(0)
    vec = gym.make_vec(
        ENV_ID, num_envs=4, vectorization_mode="vector_entry_point", scenario="cxl-spill"
    )
    vec.reset(seed=0)
    vec.action_space.seed(0)
    for _ in range(3):
        single.step(single.action_space.sample())
        vec.step(vec.action_space.sample())
    single.close()
    vec.close()


def compile_rest() -> None:
    """Compile (or load) what an environment compiles besides the solver's kernel:
    :func:`environment_steps` with the kernel stood in for."""
    with _kernel_stood_in(), np.errstate(all="ignore"):
        environment_steps()
