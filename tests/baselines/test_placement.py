"""Topology-aware placement (baselines/placement.py, issue #48 item 1): a tenant's DRAM share
on the DRAM nodes nearest to where it runs, its CXL share on the nearest expanders, in the
kernel's fallback order; on a one-socket machine the machine-wide mapping, bit for bit."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest

from baselines import make_policy
from baselines.placement import (
    auto_share,
    near_nodes,
    share_or_local_to_weights,
    share_to_weights,
    tenant_orders,
)
from envs import core
from envs.kernel import auto_interleave_weights
from envs.model import Action, compile_params, init_state, step
from envs.scenario import load_scenario

B8 = np.ndarray


def _old_share_to_weights(share: Any, bw: Any, is_cxl: Any, scale: int = 100) -> Any:
    """The mapping before topology: every DRAM node and every CXL node of the machine."""
    dram = np.where(is_cxl, 0.0, bw)
    cxl = np.where(is_cxl, bw, 0.0)
    dram = dram / np.maximum(dram.sum(axis=1, keepdims=True), 1e-300)
    cxl = cxl / np.maximum(cxl.sum(axis=1, keepdims=True), 1e-300)
    no_cxl = ~np.any(is_cxl, axis=1, keepdims=True)
    s = np.where(no_cxl, 1.0, np.clip(np.nan_to_num(share, nan=1.0), 0.0, 1.0))
    frac = s[:, :, None] * dram[:, None] + (1.0 - s)[:, :, None] * cxl[:, None]
    w = np.rint(frac * scale).astype(np.int64)
    return np.where(np.isnan(share)[:, :, None], 0, w)


def _tenant(name: str, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "threads": 4,
        "mlp": 4,
        "compute_ns": 50,
        "read_fraction": 0.8,
        "working_set_gib": 20,
        **kw,
    }


def _two_socket() -> dict[str, Any]:
    """spr-a1000-2s: dram0 (socket 0), dram1 (socket 1), cxl0 (socket 0); a tenant per socket."""
    return {
        "name": "two-socket",
        "episode_steps": 4,
        "hardware": "spr-a1000-2s",
        "tenants": [_tenant("a", socket=0), _tenant("b", socket=1)],
    }


def _snc(cxl1_socket: int = 0) -> dict[str, Any]:
    """cxl-spill's machine (two sockets of two SNC nodes each, two expanders on socket 0, or
    one per socket), a small tenant on each of the four CPU nodes."""
    spec = copy.deepcopy(load_scenario("cxl-spill").model_dump(exclude_none=True))
    spec["hardware"]["nodes"][5]["socket"] = cxl1_socket
    spec["hardware"].pop("distance", None)  # derived from the sockets
    for t in spec["tenants"]:
        t["working_set_gib"] = 10.0
        t.pop("phases", None)
    spec["episode_steps"] = 4
    return spec


def _params(spec: dict[str, Any]) -> Any:
    return compile_params(load_scenario(spec))


def _orders(p: Any) -> Any:
    """(B, T, N) every tenant slot's fallback list, from the compiled parameters."""
    return np.moveaxis(p.fallback, -1, 0)


def _hw(p: Any) -> tuple[Any, Any, Any]:
    """(B, N) bandwidth, is_cxl and socket of compiled parameters, as the Hardware view has."""
    c = p.curves
    bw = np.minimum(np.minimum(c.mem_read, c.link_read), np.minimum(c.mem_write, c.link_write))
    return bw.T, p.is_cxl.T, p.node_socket.T


def _weights(p: Any, share: float) -> Any:
    bw, cxl, sock = _hw(p)
    x = np.full((1, p.n_tenants), share)
    return share_to_weights(x, bw, cxl, 100, _orders(p), sock)


def _run(p: Any, w: Any, steps: int = 4) -> Any:
    s = init_state(p, [0])
    for _ in range(steps):
        s, out = step(p, s, Action(w.astype(float), np.zeros(1)))
    assert out.solver_converged.all()
    return s, out


def _resident(s: Any) -> Any:
    """(T, N) each tenant's GiB per node."""
    return np.asarray(s.placement)[0].sum(axis=1)


# --------------------------------------------------------------------------- one socket


@pytest.mark.parametrize("scenario", ["colocation", "mlc-bandwidth", "kv-store"])
def test_one_socket_gives_the_machine_wide_weights_bit_for_bit(scenario: str) -> None:
    p = compile_params(load_scenario(scenario))
    bw, cxl, sock = _hw(p)
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.1, 1.3, size=(1, p.n_tenants))
    x[0, 0] = np.nan
    for scale in (100, 7):
        old = _old_share_to_weights(x, bw, cxl, scale)
        assert np.array_equal(share_to_weights(x, bw, cxl, scale), old)
        assert np.array_equal(share_to_weights(x, bw, cxl, scale, _orders(p), sock), old)
        local = share_or_local_to_weights(x, bw, cxl, scale, _orders(p), sock)
        assert np.array_equal(local, np.where((x > 1.0)[..., None], 0, old))
    auto = auto_interleave_weights(bw).astype(float)
    d, c = auto_share(bw, cxl, p.n_tenants, _orders(p), sock)
    assert np.array_equal(d[:, 0], np.where(cxl, 0.0, auto).sum(1) / auto.sum(1))
    assert np.array_equal(c[:, 0], np.where(cxl, auto, 0.0).sum(1) / auto.sum(1))


def test_random_machines_on_one_socket_match_the_old_formula() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        B, R, N = rng.integers(1, 5), rng.integers(1, 5), rng.integers(2, 10)
        cxl = rng.random((B, N)) < 0.5
        cxl[:, 0] = False
        bw = rng.random((B, N)) * 100.0
        x = rng.uniform(-0.2, 1.4, size=(B, R))
        order = np.stack([np.stack([rng.permutation(N) for _ in range(R)]) for _ in range(B)])
        sock = np.zeros((B, N), dtype=np.int64)
        got = share_to_weights(x, bw, cxl, 100, order, sock)
        assert np.array_equal(got, _old_share_to_weights(x, bw, cxl))


# --------------------------------------------------------------------------- two sockets


def test_two_socket_share_of_one_stays_on_the_socket() -> None:
    p = _params(_two_socket())
    w = _weights(p, 1.0)[0]
    assert w.tolist() == [[100, 0, 0], [0, 100, 0]]  # each tenant: its socket's DRAM only
    s, _ = _run(p, w[None])
    res = _resident(s)
    assert res[0, 1] == 0.0 and res[1, 0] == 0.0  # no page on the other socket's DRAM
    assert res[1, 2] == 0.0  # nor behind the other socket's expander
    np.testing.assert_allclose(res.sum(1), [20.0, 20.0], rtol=1e-9)
    # the machine-wide mapping sends half of each tenant's pages across the socket link
    bw, cxl, _ = _hw(p)
    old = _old_share_to_weights(np.ones((1, 2)), bw, cxl)[0]
    s_old, _ = _run(p, old[None])
    assert _resident(s_old)[0, 1] > 5.0 and _resident(s_old)[1, 0] > 5.0


def test_two_socket_share_of_zero_uses_the_nearest_expander() -> None:
    p = _params(_two_socket())
    w = _weights(p, 0.0)[0]
    assert w.tolist() == [[0, 0, 100], [0, 0, 100]]  # the only expander, for both
    s, _ = _run(p, w[None])
    assert (_resident(s)[:, :2] == 0.0).all()


def test_local_dram_full_spills_down_the_fallback_list() -> None:
    """Farther nodes only as the kernel's order reaches them: socket 1's tenant with a DRAM
    share of 1 and a working set larger than its DRAM goes on to its list's next node."""
    spec = _two_socket()
    spec["hardware"] = {"preset": "spr-a1000-2s", "nodes": {"dram1": {"capacity_gib": 10}}}
    spec["tenants"] = [_tenant("b", socket=1, working_set_gib=30)]
    p = _params(spec)
    w = _weights(p, 1.0)
    assert w[0, 0].tolist() == [0, 100, 0]
    s, _ = _run(p, w)
    res = _resident(s)[0]
    order = _orders(p)[0, 0].tolist()  # dram1, then dram0 (remote DRAM 20), then cxl0 (24)
    assert order == [1, 0, 2]
    assert res[1] > 9.0 and res[0] > 19.0 - 1e-6 and res[2] < 1e-9


# --------------------------------------------------------------------------- SNC


def test_snc_share_of_one_uses_the_sockets_sub_numa_nodes() -> None:
    p = _params(_snc())
    near_d, near_c = near_nodes(_orders(p), *_hw(p)[1:])
    # tenants on dram0, dram1 (socket 0) and dram2, dram3 (socket 1)
    assert near_d[0].astype(int).tolist() == [
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 0, 1, 1, 0, 0],
    ]
    assert (near_c[0] == [0, 0, 0, 0, 1, 1]).all()  # both expanders on socket 0: nearest
    w = _weights(p, 1.0)[0]
    assert (w[:2, 2:] == 0).all() and (w[2:, :2] == 0).all() and (w[:, 4:] == 0).all()
    s, _ = _run(p, w[None])
    res = _resident(s)
    assert (res[:2, 2:4] == 0.0).all() and (res[2:, :2] == 0.0).all()
    assert (res[:, 4:] == 0.0).all()
    np.testing.assert_allclose(res.sum(1), 10.0, rtol=1e-9)


def test_snc_share_of_zero_uses_only_the_nearest_expanders() -> None:
    p = _params(_snc(cxl1_socket=1))  # one expander per socket
    w = _weights(p, 0.0)[0]
    assert (w[:2] == [0, 0, 0, 0, 100, 0]).all()
    assert (w[2:] == [0, 0, 0, 0, 0, 100]).all()
    s, _ = _run(p, w[None])
    res = _resident(s)
    assert (res[:, :4] == 0.0).all() and (res[:2, 5] == 0.0).all() and (res[2:, 4] == 0.0).all()


def test_a_bind_mask_decides_the_reachable_tier() -> None:
    """fallback-hotspot: tenants on socket 1 bound to socket 0's DRAM (numactl -m 0,1)."""
    p = compile_params(load_scenario("fallback-hotspot"))
    orders = _orders(p)
    assert (orders[0, :2, 2:] == -1).all()  # the mask excludes socket 1's nodes
    w = _weights(p, 0.5)[0]
    assert (w[:2, 2:] == 0).all() and (w[:2, :2] > 0).all()  # no CXL: all to the mask's DRAM


def test_auto_share_gives_the_auto_weights_over_the_nearest_nodes() -> None:
    p = _params(_snc())
    bw, cxl, sock = _hw(p)
    d, c = auto_share(bw, cxl, p.n_tenants, _orders(p), sock)
    np.testing.assert_allclose(d + c, 1.0)
    near_d, near_c = near_nodes(_orders(p), cxl, sock)
    for t in range(p.n_tenants):
        on = near_d[0, t] | near_c[0, t]
        auto = auto_interleave_weights(bw[0, on]).astype(float)
        assert d[0, t] == pytest.approx(auto[~cxl[0, on]].sum() / auto.sum())
        w = share_to_weights(d[:, t : t + 1], bw, cxl, 1000, _orders(p)[:, t : t + 1], sock)[0, 0]
        np.testing.assert_allclose(w[on] / w[on].sum(), auto / auto.sum(), atol=2e-3)
        assert (w[~on] == 0).all()
    # machine-wide (global weights): the auto weights of every node
    dg, _ = auto_share(bw, cxl)
    auto = auto_interleave_weights(bw).astype(float)
    assert dg[0, 0] == np.where(cxl, 0.0, auto).sum() / auto.sum()


def test_global_weights_and_unknown_tenants_are_machine_wide() -> None:
    p = _params(_snc())
    bw, cxl, sock = _hw(p)
    state, _ = core.reset(core.make_params(load_scenario(_snc())), [0])
    view = core.hardware(state)
    assert tenant_orders(view, 1) is None  # one row for every tenant
    host = dataclasses.replace(view, tenant_fallback=None)  # a host's view (deploy.py)
    assert tenant_orders(host, 4) is None
    got = tenant_orders(view, 4)
    assert got is not None and np.array_equal(got, _orders(p))
    with pytest.raises(ValueError, match="tenant_fallback has shape"):
        tenant_orders(view, 3)
    with pytest.raises(ValueError, match="need the nodes' sockets"):
        share_to_weights(np.ones((1, 4)), bw, cxl, 100, _orders(p))
    with pytest.raises(ValueError, match="fallback lists of shape"):
        share_to_weights(np.ones((1, 2)), bw, cxl, 100, _orders(p), sock)


# --------------------------------------------------------------------------- callers


def test_the_hardware_view_carries_the_tenant_lists() -> None:
    params = core.make_params(load_scenario(_snc()))
    state, _ = core.reset(params, [0, 1])
    hw = core.hardware(state)
    got = tenant_orders(hw, 4)
    assert got is not None and np.array_equal(got, np.moveaxis(state.instance.fallback, -1, 0))


@pytest.mark.parametrize("name", ["colloid", "bw-aware-interleave"])
def test_share_heuristics_keep_a_tenants_dram_on_its_socket(name: str) -> None:
    sc = load_scenario(_snc())
    pol = make_policy(name)
    params = core.make_params(sc, kernel=pol.kernel)
    pol.bind(params, 1)
    state, obs = core.reset(params, [0])
    pol.observe(None, core.hardware(state))
    for _ in range(3):
        a, _ = pol.predict(obs)
        w = pol._decide(obs)[0][0]  # the weights of this step's action (no state change
        # for these two: _decide only reads what observe stored)
        assert (w[:2, 2:4] == 0).all() and (w[2:, :2] == 0).all(), w
        state, obs, _, _, _, m, _ = core.step_autoreset(params, state, a)
        pol.observe(m, core.hardware(state))  # type: ignore[arg-type]


def test_the_nearest_sets_are_remembered_by_content_not_by_array() -> None:
    """The shares' weights on a machine seen before reuse its nearest-node sets (read-only);
    a machine whose lists or sockets differ, even in the same array, gets its own."""
    from baselines import placement

    p = _params(_snc())
    bw, cxl, sock = _hw(p)
    order = _orders(p).copy()
    first = placement._near(order, cxl, sock)
    assert first is not None
    again = placement._near(order.copy(), cxl.copy(), sock.copy())
    assert again is first and not first[0].flags.writeable and not first[1].flags.writeable
    for got, want in zip(first, near_nodes(order, cxl, sock), strict=True):
        np.testing.assert_array_equal(got, want)
    order[0, 0] = order[0, 3]  # the first tenant now runs where the fourth does
    moved = placement._near(order, cxl, sock)
    assert moved is not None and moved is not first
    np.testing.assert_array_equal(moved[0], near_nodes(order, cxl, sock)[0])
    assert not np.array_equal(moved[0][0, 0], first[0][0, 0])
    # the weights a share gives are the same with a cold memo as with a warm one
    x = np.full((1, p.n_tenants), 0.6)
    warm = share_to_weights(x, bw, cxl, 100, order, sock)
    with placement._NEAR_LOCK:
        placement._NEAR.clear()
        placement._near_bytes = 0
    np.testing.assert_array_equal(share_to_weights(x, bw, cxl, 100, order, sock), warm)


def test_the_remembered_sets_stay_within_their_count_and_bytes(monkeypatch: Any) -> None:
    """The memo forgets the machines seen longest ago past its count or its bytes, and keeps
    an account of what it holds."""
    from baselines import placement

    p = _params(_snc())
    _, cxl, sock = _hw(p)
    order = _orders(p)
    monkeypatch.setattr(placement, "_NEAR", type(placement._NEAR)())
    monkeypatch.setattr(placement, "_near_bytes", 0)
    monkeypatch.setattr(placement, "_NEAR_SIZE", 3)
    nodes = order.shape[-1]
    machines = [np.roll(order, k, axis=2) for k in range(nodes)]  # six different lists
    for m in machines:
        placement._near(m, cxl, sock)
    assert len(placement._NEAR) == 3
    held = sum(placement._entry_bytes(k, v) for k, v in placement._NEAR.items())
    assert placement._near_bytes == held
    one = held // 3
    monkeypatch.setattr(placement, "_NEAR_BYTES", one + one // 2)  # room for one machine
    placement._near(machines[0], cxl, sock)  # seen longest ago: gone, made again
    assert len(placement._NEAR) == 1 and placement._near_bytes == one
    assert next(iter(placement._NEAR.values())) is placement._near(machines[0], cxl, sock)
