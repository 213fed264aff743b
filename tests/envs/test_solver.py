"""The fixed-point solver (envs/solver.py): its Jacobian against finite differences, its solution.

Newton's method is only as good as the Jacobian it is given: a wrong term still
converges (slowly, or to the backtracking's best) on most problems, so the
solution tests alone would not catch it. Here ``Problem.jacobian`` is compared
with central differences of ``Problem.evaluate``'s residual, in ``z = log X``.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
from typing import Any

import numba
import numpy as np
import pytest

import envs.solver
from envs import compile_params, load_scenario
from envs.jit import THREADS_VAR, _parse_threads, set_threads
from envs.solver import TOL, NodeCurves, Problem, solve_fixed_point


def _curves(hardware: str, no_link: bool = False) -> NodeCurves:
    spec = {
        "name": "curves",
        "episode_steps": 1,
        "hardware": hardware,
        "tenants": [
            {
                "name": "t",
                "threads": 1,
                "mlp": 1,
                "compute_ns": 0,
                "read_fraction": 0.5,
                "working_set_gib": 1,
            }
        ],
    }
    c = compile_params(load_scenario(spec)).curves
    if no_link:
        c = dataclasses.replace(
            c,
            link_read=np.full_like(c.link_read, np.inf),
            link_write=np.full_like(c.link_write, np.inf),
        )
    return c


def random_problem(
    rng: np.random.Generator, nc1: NodeCurves, T: int, B: int, remote: bool, inactive: bool
) -> tuple[Problem, np.ndarray]:
    """A random problem over B copies of a machine and a point x with every resource loaded
    to at most ~60%."""
    N = nc1.idle_ns.shape[0]
    nc = NodeCurves(
        **{
            f.name: np.repeat(getattr(nc1, f.name), B, axis=1)
            for f in dataclasses.fields(NodeCurves)
        }
    )
    cap = rng.uniform(500.0, 5000.0, (T, B))
    if inactive:
        cap[-1, : B // 2 + 1] = 0.0  # an absent tenant in some elements
    compute = rng.uniform(0.0, 300.0, (T, B))
    rfrac = rng.uniform(0.0, 1.0, (T, B))
    share = rng.dirichlet(np.ones(N), (T, B)).transpose(0, 2, 1)  # (T, N, B), sums to 1
    rem = (rng.random((T, N, B)) < 0.5).astype(float) if remote else np.zeros((T, N, B))
    bg_rd = rng.uniform(0.0, 2.0, (N, B))
    bg_wr = rng.uniform(0.0, 2.0, (N, B))
    pb = Problem(cap, compute, rfrac, share, rem, bg_rd, bg_wr, nc)
    x = rng.uniform(0.5, 3.0, (T, B))
    x = np.where(pb.active, x, 0.0)
    ev = pb.evaluate(x)
    load = np.maximum(ev["u_loc"].max(0), ev["u_rem"].max(0))
    x = x * np.minimum(1.0, 0.6 / load)  # moderate load: away from the queue's pole
    return pb, x


def fd_jacobian(pb: Problem, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of the residual in log X: (T, T, B)."""
    T, B = x.shape
    z = np.log(np.maximum(x, 1e-300))
    J = np.zeros((T, T, B))
    for s in range(T):
        dz = np.zeros_like(z)
        dz[s] = h
        hi = pb.evaluate(np.where(pb.active, np.exp(z + dz), 0.0))["resid"]
        lo = pb.evaluate(np.where(pb.active, np.exp(z - dz), 0.0))["resid"]
        J[:, s] = (hi - lo) / (2 * h)
    return J


CASES: list[tuple[str, dict[str, Any]]] = [
    ("spr-a1000", {}),  # DRAM + CXL with a link (some rows without one)
    ("spr-a1000", {"no_link": True}),  # no link anywhere
    ("spr-a1000-2s", {"remote": True}),  # two sockets: remote paths
    ("spr-4cxl", {}),  # every CXL node with a link, five nodes
]


@pytest.mark.parametrize(("hardware", "opts"), CASES)
def test_jacobian_matches_central_differences(hardware: str, opts: dict[str, Any]) -> None:
    rng = np.random.default_rng(len(hardware) + 7 * len(opts))
    nc = _curves(hardware, no_link=opts.get("no_link", False))
    pb, x = random_problem(rng, nc, T=4, B=6, remote=opts.get("remote", False), inactive=True)
    ev = pb.evaluate(x)
    assert ev["feasible"].all()
    J = pb.jacobian(x)
    fd = fd_jacobian(pb, x)
    act = pb.active
    both = act[:, None] & act[None]
    # the Jacobian has coupling terms (off the diagonal) of a size finite differences resolve
    off = both & ~np.eye(pb.T, dtype=bool)[:, :, None]
    assert np.abs(J[off]).max() > 1e-3
    np.testing.assert_allclose(J[both], fd[both], rtol=1e-5, atol=1e-8)
    # an absent tenant's row and column are the identity's (the solver does not move it)
    for b in range(x.shape[1]):
        for t in np.flatnonzero(~act[:, b]):
            row = np.zeros(pb.T)
            row[t] = 1.0
            np.testing.assert_array_equal(J[t, :, b], row)
            np.testing.assert_array_equal(J[:, t, b], row)


def test_jacobian_near_saturation() -> None:
    """Close to a resource's peak the knee dominates; the derivative still matches."""
    rng = np.random.default_rng(3)
    pb, x = random_problem(rng, _curves("spr-a1000"), T=3, B=4, remote=False, inactive=False)
    for _ in range(30):  # background traffic is fixed: scale the tenants' part up to ~97%
        ev = pb.evaluate(x)
        load = np.maximum(ev["u_loc"].max(0), ev["u_rem"].max(0))
        x = x * (1.0 + 0.8 * (0.97 / load - 1.0))
    ev = pb.evaluate(x)
    assert ev["feasible"].all() and (ev["u_loc"].max(0) > 0.96).all()
    np.testing.assert_allclose(pb.jacobian(x), fd_jacobian(pb, x, h=1e-7), rtol=1e-4, atol=1e-6)


def test_sub_problem_gives_the_same_numbers() -> None:
    """A sub-problem (what the solver gathers for a few elements) gives the batch's numbers."""
    rng = np.random.default_rng(5)
    pb, x = random_problem(rng, _curves("spr-a1000-2s"), T=3, B=7, remote=True, inactive=True)
    ev = pb.evaluate(x)
    J = pb.jacobian(x)
    idx = np.array([1, 4, 6])
    sub = pb.take(idx)
    sev = sub.evaluate(x[:, idx])
    for k in ("resid", "lbar", "lnode", "u_loc", "u_rem", "rd", "wr"):
        np.testing.assert_array_equal(sev[k], ev[k][..., idx], err_msg=k)
    np.testing.assert_array_equal(sub.jacobian(x[:, idx]), J[..., idx])


@pytest.mark.parametrize("hardware", ["spr-a1000", "spr-a1000-2s"])
def test_solution_satisfies_littles_law(hardware: str) -> None:
    """At the solution X_t (compute_t + Lbar_t) = C_t for every active tenant, to TOL."""
    rng = np.random.default_rng(11)
    pb, _ = random_problem(
        rng, _curves(hardware), T=4, B=8, remote=hardware.endswith("2s"), inactive=True
    )
    sol = solve_fixed_point(
        pb.cap, pb.compute, pb.rfrac, pb.share, pb.remote, pb.bg_rd, pb.bg_wr, pb.nc
    )
    assert (sol.residual <= TOL).all()
    act = pb.active
    lhs = sol.throughput * (pb.compute + sol.tenant_latency_ns)
    np.testing.assert_allclose(lhs[act], pb.cap[act], rtol=2 * TOL)
    assert (sol.throughput[~act] == 0).all()
    assert (sol.node_util < 1.0).all()
    # the reported latencies are the evaluation's at the solution
    ev = pb.evaluate(sol.throughput)
    np.testing.assert_allclose(ev["lbar"][act], sol.tenant_latency_ns[act], rtol=1e-12)


def test_retry_solves_again_what_newton_left_unconverged() -> None:
    """With one Newton iteration most elements stay above the tolerance; the retry (a cold
    start, then continuation over the bytes in flight) brings each one's residual no higher
    than without it, and the elements it improves to the tolerance satisfy Little's law."""
    rng = np.random.default_rng(17)
    pb, _ = random_problem(rng, _curves("spr-a1000"), T=4, B=12, remote=False, inactive=True)
    pb = dataclasses.replace(pb, cap=pb.cap * 8.0)  # deep in the knee: hard from a cold start
    plain = pb.solve(max_iter=1, retry=False)
    assert (plain.residual > TOL).sum() >= 6
    again = pb.solve(max_iter=1, retry=True)
    assert (again.residual <= plain.residual).all()
    assert (again.residual < plain.residual).any()
    assert (again.iterations >= plain.iterations).all()  # the retries' iterations are added
    done = again.residual <= TOL
    lhs = again.throughput * (pb.compute + again.tenant_latency_ns)
    act = pb.active & done[None]
    np.testing.assert_allclose(lhs[act], pb.cap[act], rtol=2 * TOL)


def _bits(sol: Any, idx: np.ndarray) -> dict[str, bytes]:
    return {
        f.name: np.ascontiguousarray(getattr(sol, f.name)[..., idx]).tobytes()
        for f in dataclasses.fields(sol)
    }


@pytest.mark.parametrize(("hardware", "remote"), [("spr-a1000", False), ("spr-a1000-2s", True)])
def test_an_element_gets_the_same_numbers_in_any_batch(hardware: str, remote: bool) -> None:
    """The kernel solves 32 elements side by side and sets aside the few that still
    iterate when the rest of their block is done (the stragglers), to go on beside
    other stragglers. Whichever lanes, blocks and neighbours an element has, its
    numbers are those it gets alone, bit for bit: in a batch of 300 (easy and hard
    elements mixed, warm and cold starts), in that batch reversed, and one at a time."""
    rng = np.random.default_rng(23)
    B = 300
    pb, x = random_problem(rng, _curves(hardware), T=4, B=B, remote=remote, inactive=True)
    hard = rng.random(B) < 0.15  # deep in the knee: more Newton iterations than the rest
    pb = dataclasses.replace(pb, cap=pb.cap * np.where(hard, 8.0, 1.0))
    x0 = np.where(rng.random(B) < 0.5, x, 0.0)  # half warm-started (0: from the demand)
    sol = pb.solve(x0=x0, retry=False)
    blocks = sol.iterations[: B - B % 32].reshape(-1, 32)
    assert (blocks.max(1) > np.median(blocks, 1)).sum() >= 4  # blocks with stragglers
    every = np.arange(B)
    rev = every[::-1]
    flipped = pb.take(rev).solve(x0=x0[:, rev], retry=False)
    assert _bits(flipped, np.argsort(rev)) == _bits(sol, every)
    for b in rng.choice(B, 40, replace=False):
        alone = pb.take(np.array([b])).solve(x0=x0[:, [b]], retry=False)
        assert _bits(alone, np.array([0])) == _bits(sol, np.array([b])), b


# slow: the threaded kernel (_solve_chunks) is compiled for these two tests alone, about 45 s
# of a fresh clone's compile; CI runs them (make test-all)
@pytest.mark.slow
@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one core: no second thread")
def test_threads_give_the_same_numbers() -> None:
    """With two threads (``envs.jit.set_threads``) a large batch is split in two and each
    half solved on its own thread, with its own stragglers: every element's numbers are
    those of one thread, bit for bit. A small batch is not split."""
    rng = np.random.default_rng(29)
    B = 2 * 4 * 32 + 37  # two threads' worth of blocks, the last one partial
    pb, x = random_problem(rng, _curves("spr-a1000"), T=4, B=B, remote=False, inactive=True)
    hard = rng.random(B) < 0.15
    pb = dataclasses.replace(pb, cap=pb.cap * np.where(hard, 8.0, 1.0))
    x0 = np.where(rng.random(B) < 0.5, x, 0.0)
    calls: list[int] = []
    split = envs.solver._solve_chunks

    def count(*a: Any) -> Any:
        calls.append(a[0].shape[2])
        return split(*a)

    one = pb.solve(x0=x0, retry=False)
    try:
        envs.solver._solve_chunks = count
        set_threads(2)
        two = pb.solve(x0=x0, retry=False)
        small = pb.take(np.arange(64)).solve(x0=x0[:, :64], retry=False)
    finally:
        set_threads(1)
        envs.solver._solve_chunks = split
    assert calls == [B]  # the large batch was split, the small one not
    every = np.arange(B)
    assert _bits(two, every) == _bits(one, every)
    assert _bits(small, np.arange(64)) == _bits(one, np.arange(64))


def _solve_in_child(pb: Problem, out: Any) -> None:
    out.put(pb.solve(retry=False).throughput.tobytes())


@pytest.mark.slow  # the threaded kernel, as above
@pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2 or "fork" not in mp.get_all_start_methods(),
    reason="needs two cores and fork",
)
def test_a_process_forked_after_threaded_solves_solves_on_one_thread() -> None:
    """GNU OpenMP terminates a forked child that starts parallel work its parent had
    started; a child forked after threaded solves solves on one thread, with the same
    numbers."""
    rng = np.random.default_rng(31)
    pb, _ = random_problem(rng, _curves("spr-a1000"), T=4, B=300, remote=False, inactive=True)
    try:
        set_threads(2)
        parent = pb.solve(retry=False).throughput.tobytes()
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_solve_in_child, args=(pb, out))
        child.start()
        child.join(120)
    finally:
        set_threads(1)
    assert child.exitcode == 0
    assert out.get(timeout=5) == parent


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "100000"])
def test_a_bad_thread_count_names_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match=f"TIERGYM_THREADS='{value}': expected a whole number"):
        _parse_threads(value, THREADS_VAR)
    assert _parse_threads("auto", THREADS_VAR) == numba.config.NUMBA_NUM_THREADS


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the last place of ref (subnormal spacing below the normals)."""
    return np.abs(got - ref) / np.spacing(np.abs(ref))


def test_the_kernels_exp_and_log_are_within_one_ulp_of_libm() -> None:
    """The solver's exp and log are its own polynomials (they vectorise; libm's calls do
    not): within 1 ulp of the C library's over their whole range, special values exact."""
    from envs.solver import _exp, _log

    rng = np.random.default_rng(23)
    xs = np.concatenate(
        [
            rng.uniform(-745.0, 709.7, 4000),
            rng.uniform(-30.0, 5.0, 4000),  # the solver's range: e * log(u), log X
            rng.uniform(-745.0, -708.0, 500),  # subnormal results
        ]
    )
    got = np.array([_exp(float(v)) for v in xs])
    ref = np.array([math.exp(v) for v in xs])
    assert _ulps(got, ref).max() <= 1.0
    ys = np.concatenate(
        [
            np.exp(rng.uniform(-700.0, 700.0, 4000)),
            rng.uniform(1e-12, 1.0, 4000),  # utilisations
            rng.uniform(0.5, 2.0, 2000),  # around 1, where log is smallest
            np.array([5e-324, 1e-310, 2.2e-308]),  # subnormal arguments
        ]
    )
    got = np.array([_log(float(v)) for v in ys])
    ref = np.array([math.log(v) for v in ys])
    assert _ulps(got, ref).max() <= 1.0
    assert _exp(710.0) == np.inf and _exp(-746.0) == 0.0 and _exp(0.0) == 1.0
    assert _exp(-np.inf) == 0.0 and _exp(np.inf) == np.inf and np.isnan(_exp(np.nan))
    assert _log(1.0) == 0.0 and _log(0.0) == -np.inf and _log(np.inf) == np.inf
    assert np.isnan(_log(-1.0)) and np.isnan(_log(np.nan))
