"""The action codec (envs/spaces.py): every discrete choice and every box weight, exactly."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envs.spaces import RATE_LEVELS_MBPS, WEIGHT_LEVELS, ActionCodec


def reduced(row: tuple[int, ...] | list[int]) -> list[int]:
    """The kernel's gcd reduction, written independently: 0 stays 0 (outside the mask)."""
    g = 0
    for v in row:
        if v > 0:
            g = math.gcd(g, int(v))
    return [int(v) // g if g else int(v) for v in row]


def test_discrete_space_layout() -> None:
    codec = ActionCodec(2, 3, action_type="discrete")
    space = codec.space()
    assert isinstance(space, spaces.MultiDiscrete)
    assert space.nvec.tolist() == [len(WEIGHT_LEVELS)] * 6 + [len(RATE_LEVELS_MBPS)]
    glob = ActionCodec(2, 3, weights="global", action_type="discrete").space()
    assert isinstance(glob, spaces.MultiDiscrete)
    assert glob.nvec.tolist() == [len(WEIGHT_LEVELS)] * 3 + [len(RATE_LEVELS_MBPS)]


def test_every_discrete_choice_maps_to_its_level_gcd_reduced() -> None:
    """All len(WEIGHT_LEVELS)**2 weight pairs of a 2-node machine, with every rate level."""
    codec = ActionCodec(1, 2, action_type="discrete")
    L, R = len(WEIGHT_LEVELS), len(RATE_LEVELS_MBPS)
    choices = np.array(
        [[i, j, r] for i in range(L) for j in range(L) for r in range(R)], dtype=np.int64
    )
    act, w = codec.decode(choices)
    assert w.shape == (len(choices), 1, 2)
    for k, (i, j, r) in enumerate(choices):
        want = reduced([WEIGHT_LEVELS[i], WEIGHT_LEVELS[j]])
        assert w[k, 0].tolist() == want, (i, j)
        assert act.weights[k, 0].tolist() == [float(v) for v in want]
        assert act.promote_mbps[k] == RATE_LEVELS_MBPS[r]
    # e.g. levels 4:16 -> 1:4, 6:4 -> 3:2, 0:8 -> 0:1
    i4, i16, i6, i0, i8 = (WEIGHT_LEVELS.index(v) for v in (4, 16, 6, 0, 8))
    _, w = codec.decode(np.array([[i4, i16, 0], [i6, i4, 0], [i0, i8, 0]]))
    assert w[:, 0].tolist() == [[1, 4], [3, 2], [0, 1]]


def test_discrete_per_tenant_and_global_rows() -> None:
    per = ActionCodec(3, 2, action_type="discrete")
    a = np.array([[1, 2, 3, 3, 0, 0, 6]])  # tenant rows (1,2), (3,3), (0,0); top rate
    act, w = per.decode(a)
    assert w[0].tolist() == [[1, 2], [1, 1], [0, 0]]
    assert act.promote_mbps.tolist() == [RATE_LEVELS_MBPS[6]]
    glob = ActionCodec(3, 2, weights="global", action_type="discrete")
    act, w = glob.decode(np.array([[4, 6, 1]]))  # 4:8 -> 1:2 for every tenant
    assert w[0].tolist() == [[1, 2]] * 3 and act.weights.shape == (1, 3, 2)
    assert act.promote_mbps.tolist() == [RATE_LEVELS_MBPS[1]]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([[8, 0, 0]], "out of range"),
        ([[0, 0, 7]], "out of range"),
        ([[-1, 0, 0]], "out of range"),
        ([[0.0, np.nan, 0.0]], "NaN"),
        ([[0, 0]], "expected"),
    ],
)
def test_discrete_bad_choices_are_errors(bad: list[list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ActionCodec(1, 2, action_type="discrete").decode(np.array(bad))


def test_box_round_trip_over_every_weight_pair() -> None:
    """encode_box then decode gives back every integer weight pair 0..255 x 0..255, gcd-reduced.

    0 means outside the interleave mask; (0, 0) is local-first.
    """
    codec = ActionCodec(1, 2)
    v = np.arange(256)
    pairs = np.stack(np.meshgrid(v, v, indexing="ij"), axis=-1).reshape(-1, 2)
    a = codec.encode_box(pairs[:, None, :], np.zeros(len(pairs)))
    assert a.dtype == np.float32 and (np.abs(a) <= 1.0).all()
    _, w = codec.decode(a)
    g = np.gcd(pairs[:, 0], pairs[:, 1])
    want = np.where(g[:, None] > 0, pairs // np.maximum(g, 1)[:, None], pairs)
    np.testing.assert_array_equal(w[:, 0], want)
    # the single weights, exactly (w:1 is already reduced)
    np.testing.assert_array_equal(w[pairs[:, 1] == 1, 0, 0], v)
    # spot checks against the independent reduction
    for p in ([26, 5], [6, 3], [255, 255], [0, 7], [128, 64], [254, 127]):
        k = p[0] * 256 + p[1]
        assert w[k, 0].tolist() == reduced(p)


def test_box_round_trip_three_nodes_per_tenant_rows() -> None:
    codec = ActionCodec(2, 3)
    rng = np.random.default_rng(0)
    wts = rng.integers(0, 256, (500, 2, 3))
    _, w = codec.decode(codec.encode_box(wts, np.zeros(500)))
    for k in range(500):
        for t in range(2):
            assert w[k, t].tolist() == reduced(wts[k, t].tolist())


@pytest.mark.parametrize("top", [65536.0, 4096.0])
def test_box_round_trip_over_rates(top: float) -> None:
    codec = ActionCodec(1, 2, max_promote_mbps=top)
    rates = np.concatenate([[0.0], np.arange(1.0, 2049.0), np.geomspace(1.0, top, 2000)])
    rates = rates[rates <= top]
    a = codec.encode_box(np.ones((len(rates), 1, 2)), rates)
    act, _ = codec.decode(a)
    assert act.promote_mbps[0] == 0.0  # off
    np.testing.assert_allclose(act.promote_mbps[1:], rates[1:], rtol=2e-6)  # float32 actions
    # ends of the scale: -0.9 is 1 MB/s, 1 is the top; below -0.9 is off
    act, _ = codec.decode(np.array([[0, 0, -0.9], [0, 0, 1.0], [0, 0, -0.91], [0, 0, 3.0]]))
    np.testing.assert_allclose(act.promote_mbps, [1.0, top, 0.0, top], rtol=1e-12)


def test_box_weight_scale_ends_and_clipping() -> None:
    codec = ActionCodec(1, 2)
    act, w = codec.decode(np.array([[-0.9, 1.0, 0.0], [-0.91, 0.5, 0.0], [-5.0, -5.0, 0.0]]))
    assert w[:, 0].tolist() == [[1, 255], [0, 1], [0, 0]]
    # all-zero weights mean local-first: the model gets zeros too
    assert act.weights[2].tolist() == [[0.0, 0.0]]
    # the log scale in between: round(255 ** ((a + 0.9) / 1.9)), the other node at weight 1
    for a in np.linspace(-0.9, 1.0, 77):
        _, w = codec.decode(np.array([[a, -0.9, 0.0]]))
        assert w[0, 0].tolist() == [round(255 ** ((a + 0.9) / 1.9)), 1], a


def test_codec_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="weights"):
        ActionCodec(1, 2, weights="per-node")
    with pytest.raises(ValueError, match="action_type"):
        ActionCodec(1, 2, action_type="continuous")
    with pytest.raises(ValueError, match="max_promote_mbps"):
        ActionCodec(1, 2, max_promote_mbps=1.0)


def test_every_level_is_reachable_in_box_space() -> None:
    """Every discrete level is a point of the box scale (the two action types agree)."""
    codec = ActionCodec(1, 2)
    for lv in WEIGHT_LEVELS:
        _, w = codec.decode(codec.encode_box(np.array([[[lv, 0]]]), np.zeros(1)))
        assert w[0, 0].tolist() == reduced([lv, 0])
    for r in RATE_LEVELS_MBPS:
        act, _ = codec.decode(codec.encode_box(np.ones((1, 1, 2)), np.array([r])))
        assert act.promote_mbps[0] == pytest.approx(r, rel=2e-6)


def test_all_global_weight_rows_are_broadcast() -> None:
    codec = ActionCodec(4, 2, weights="global")
    combos = list(itertools.product(range(0, 256, 17), repeat=2))
    wts = np.array(combos)[:, None, :]
    _, w = codec.decode(codec.encode_box(wts, np.zeros(len(combos))))
    assert w.shape == (len(combos), 4, 2)
    for k, c in enumerate(combos):
        assert w[k].tolist() == [reduced(c)] * 4


def test_cgroup_layout_shows_the_limits_and_only_they_differ() -> None:
    """observation="cgroup" adds memory.low and memory.high over the working set to a
    tenant's descriptors: at the start colocation and colocation-protected (24 GiB
    memory.high on the 40 GiB batch tenant) differ in exactly that entry, and "full"
    cannot tell them apart."""
    import numpy as np

    from envs import core

    def first_obs(sc: str, layout: str) -> tuple[np.ndarray, list[str]]:
        params = core.make_params(sc, observation=layout, pool_size=4)
        _, obs = core.reset(params, np.arange(1, dtype=np.uint64))
        return np.asarray(obs)[0], params.encoder.names(params.node_names)

    full_a, _ = first_obs("colocation", "full")
    full_b, _ = first_obs("colocation-protected", "full")
    assert np.array_equal(full_a, full_b)
    a, names = first_obs("colocation", "cgroup")
    b, _ = first_obs("colocation-protected", "cgroup")
    n_limits = sum(".memory_" in n for n in names)
    assert n_limits == 2 * sum(n.endswith(".present") for n in names)
    assert len(a) == len(full_a) + n_limits
    differ = {names[i] for i in np.flatnonzero(a != b)}
    assert differ == {"tenant[0].memory_high_over_ws"}  # the service arrives later
    got = dict(zip(names, b, strict=True))
    assert got["tenant[0].memory_high_over_ws"] == pytest.approx(24 / 40, rel=0.06)  # ws jitter
    assert dict(zip(names, a, strict=True))["tenant[0].memory_high_over_ws"] == 1.0  # no limit


def test_cgroup_layout_shows_the_limits_in_force_under_tier_aware_memcg() -> None:
    """The cgroup descriptors are the limits as the kernel applies them: with the tier-aware
    memcg limits (tiering-fairness-low-high) memory.low and memory.high are scaled to the
    DRAM share of the machine (256 of 320 GiB), so a memory.high equal to the working set
    still caps the streamer's DRAM and the policy can tell the scenario from
    tiering-fairness-low, whose first observation is otherwise the same."""
    from envs import core

    def first_obs(sc: str) -> dict[str, float]:
        params = core.make_params(sc, observation="cgroup", pool_size=4)
        _, obs = core.reset(params, np.arange(1, dtype=np.uint64))
        return dict(zip(params.encoder.names(params.node_names), np.asarray(obs)[0], strict=True))

    low, both = first_obs("tiering-fairness-low"), first_obs("tiering-fairness-low-high")
    differ = {k for k in low if low[k] != both[k]}
    assert differ == {"tenant[0].memory_low_over_ws", "tenant[0].memory_high_over_ws"}
    assert low["tenant[0].memory_low_over_ws"] == pytest.approx(128 / 256)
    assert low["tenant[0].memory_high_over_ws"] == 1.0  # no memory.high
    assert both["tenant[0].memory_low_over_ws"] == pytest.approx(128 / 256 * 256 / 320)
    assert both["tenant[0].memory_high_over_ws"] == pytest.approx(256 / 256 * 256 / 320)


def _first_obs_beside(scenario: Any, layout: str, before: str) -> tuple[Any, Any, dict, dict]:
    """The first observation of one instance of ``scenario`` in ``layout`` and in the layout
    ``before`` it, by entry name, after checking that ``layout`` adds one descriptor per
    tenant and shows every entry of ``before`` as ``before`` does. Returns the params and
    state of ``layout`` and both observations."""
    from envs import core

    params = core.make_params(scenario, observation=layout)
    prev = core.make_params(scenario, observation=before)
    names = params.encoder.names(params.node_names)
    state, obs = core.reset(params, np.arange(1, dtype=np.uint64))
    _, obs_prev = core.reset(prev, np.arange(1, dtype=np.uint64))
    assert len(names) == len(set(names)) == prev.encoder.size + params.n_tenants
    got = dict(zip(names, np.asarray(obs)[0], strict=True))
    got_prev = dict(zip(prev.encoder.names(prev.node_names), np.asarray(obs_prev)[0], strict=True))
    assert {k: got[k] for k in got_prev} == got_prev  # everything else as ``before`` shows it
    return params, state, got, got_prev


def test_demand_layout_adds_the_zero_load_demand_over_the_local_peak() -> None:
    """observation="demand" is "cgroup" plus one descriptor per tenant: its zero-load demand
    in its local DRAM over that node's peak at its read share, ``log2(1 + x) / 4``. It equals
    what the model measures when the pages are there (MLC with DRAM-only weights: the step's
    zero-load demand over its DRAM node's peak), and it keeps growing with MLC's threads
    where ``solo_demand`` saturates with DRAM (x exactly 4 times larger from 16 to 64)."""
    from envs import core
    from envs.scenario import load_scenario

    def run(threads: int) -> tuple[dict[str, float], dict[str, float], float]:
        raw = load_scenario("mlc-bandwidth").model_dump()
        raw["tenants"][0]["threads"] = threads
        params, state, first, got_cg = _first_obs_beside(raw, "demand", "cgroup")
        weights = np.zeros((1, params.codec.n_weight_rows, params.n_nodes), dtype=np.int64)
        weights[:, :, params.node_names.index("dram0")] = 1  # every page in local DRAM
        a = params.codec.encode_box(weights, np.zeros(1))
        _, _, _, _, _, m = core.step(params, state, a)
        x = m.tenant_demand_gbps[0, 0] / m.node_peak_gbps[0, params.node_names.index("dram0")]
        return first, got_cg, float(x)

    low, _, x16 = run(16)
    high, _, x64 = run(64)
    for first, x in ((low, x16), (high, x64)):
        assert first["tenant[0].demand_over_local_peak"] == pytest.approx(
            math.log2(1.0 + x) / 4.0, rel=1e-6
        )
    assert x64 == pytest.approx(4.0 * x16, rel=1e-12)
    assert x16 > 1.0  # 16 MLC threads already ask more than DRAM's peak
    assert high["tenant[0].solo_demand"] < 1.3 * low["tenant[0].solo_demand"]  # saturates


@pytest.mark.parametrize("scenario", ["mlc-bandwidth", "cxl-spill", "fallback-hotspot"])
def test_topology_layout_adds_the_auto_dram_share_of_the_nearest_nodes(scenario: str) -> None:
    """observation="topology" is "demand" plus one descriptor per tenant: the DRAM share of
    the kernel's weighted-interleave auto weights over the DRAM nodes of its own socket and
    the CXL nodes of the socket its fallback list reaches first (one socket and four
    expanders; two sockets with SNC nodes and an expander each; no CXL at all: 1)."""
    from envs import core
    from envs.kernel import auto_interleave_weights

    params, state, got, _ = _first_obs_beside(scenario, "topology", "demand")
    hw = core.hardware(state)
    cxl, sock, bw = hw.is_cxl[0], hw.socket[0], hw.firmware_gbps[0]
    shown = 0
    for t in range(params.n_tenants):
        if not got[f"tenant[{t}].present"] and not got[f"tenant[{t}].upcoming"]:
            continue
        order = hw.tenant_fallback[0, t]
        first_cxl = next((n for n in order if n >= 0 and cxl[n]), None)
        on_d = ~cxl & (sock == sock[order[0]])
        on_c = cxl & (sock == sock[first_cxl]) if first_cxl is not None else np.zeros_like(cxl)
        on = on_d | on_c
        w = np.where(on, auto_interleave_weights(np.where(on, bw, 0.0)), 0)
        want = w[on_d].sum() / w.sum()
        assert got[f"tenant[{t}].near_auto_dram_share"] == pytest.approx(want, rel=1e-6)
        assert not on_c.any() or want < 1.0
        assert on_c.any() or want == 1.0
        shown += 1
    assert shown >= 1


# -- bad actions: one-line errors naming the field -------------------------------------------

PER: dict[str, Any] = {
    "n_tenants": 2,
    "n_nodes": 2,
}  # entries: weight t0 n0, t0 n1, t1 n0, t1 n1, promote
MODES: dict[str, Any] = {**PER, "modes": ("default", "tpp")}  # ... then mode


@pytest.mark.parametrize(
    ("kwargs", "action", "error", "message"),
    [
        (PER, "abc", TypeError, "action: got str 'abc', expected an array of shape (5,)"),
        (PER, None, TypeError, "action: got NoneType None, expected an array of shape (5,)"),
        (PER, {"promote": 0.0}, TypeError, "action: got dict {'promote': 0.0}, expected"),
        (PER, b"x", TypeError, "action: got bytes b'x', expected"),
        (PER, [0.0, 0.0, 0.0, 0.0, "x"], TypeError, "action[promote]: got str 'x'"),
        (PER, [0.0, "1", 0.0, 0.0, 0.0], TypeError, "action[weight t0 n1]: got str '1'"),
        (
            PER,
            [0, 0, 0, 0, [1.0, 2.0]],
            TypeError,
            "action[promote]: got list [1.0, 2.0], expected one number, not a sequence",
        ),
        (
            PER,
            [0, 0, [1], 0, 0],
            TypeError,
            "action[weight t1 n0]: got list [1], expected one number",
        ),
        (
            PER,
            [0, 0, 0, None, 0],
            TypeError,
            "action[weight t1 n1]: got NoneType None, expected a real number",
        ),
        (
            PER,
            [0, 0, 0, 0, 2**70],
            TypeError,
            "action[promote]: got int 1180591620717411303424, expected a number that fits in 64 bits",
        ),
        (
            PER,
            [0, 0, 0, 0, 1j],
            TypeError,
            "action[promote]: got complex 1j, expected a real number",
        ),
        (
            PER,
            np.zeros(5, dtype=complex),
            TypeError,
            "action: got an array of complex numbers (dtype complex128), expected an int or float array",
        ),
        (PER, np.zeros(5, dtype=bool), TypeError, "action: got an array of bools (dtype bool)"),
        (PER, np.array(["0"] * 5), TypeError, "action: got an array of strings (dtype <U1)"),
        (PER, np.zeros(5, dtype="timedelta64[s]"), TypeError, "action: got an array of time spans"),
        (
            PER,
            np.array([0.0] * 5, dtype=object),
            TypeError,
            "action: got an array of Python objects, expected an int or float array",
        ),
        (
            PER,
            np.array([0.0, 0.0, 0.0, 0.0, "x"], dtype=object),
            TypeError,
            "action[promote]: got str 'x'",
        ),
        (PER, 0.5, ValueError, "action: got shape (), expected (5,)"),
        (PER, np.zeros(6), ValueError, "action: got shape (6,), expected (5,)"),
        (PER, np.zeros((5, 1)), ValueError, "action: got shape (5, 1), expected (5,)"),
        (PER, [], ValueError, "action: got shape (0,), expected (5,)"),
        (
            MODES,
            [0, 0, 0, 0, 0, "tpp"],
            TypeError,
            "action[mode]: got str 'tpp', expected a real number",
        ),
        ({**PER, "weights": "global"}, [0, [0], 0], TypeError, "action[weight n1]: got list [0]"),
        (
            {**PER, "action_type": "discrete"},
            [0, 0, 0, 0, 0.5j],
            TypeError,
            "action[promote]: got complex 0.5j",
        ),
    ],
)
def test_check_names_the_field_and_what_was_expected(
    kwargs: dict[str, Any], action: object, error: type[Exception], message: str
) -> None:
    """What a user passes to step() is checked before any numpy conversion can fail: a one-line
    error of the right type, naming the entry where one is at fault (the case in the message)."""
    with pytest.raises(error) as exc:
        ActionCodec(**kwargs).check(action)
    text = str(exc.value)
    assert text.startswith(message), text
    assert "\n" not in text and exc.value.__cause__ is None


def test_check_of_a_batch_names_the_instance_and_the_entry() -> None:
    codec = ActionCodec(**PER)
    good = [[0.0] * 5, [0.0] * 5]
    assert codec.check(good, 2).shape == (2, 5)
    with pytest.raises(TypeError, match=r"^actions\[1\]\[promote\]: got list \[1, 2\]"):
        codec.check([[0.0] * 5, [0.0, 0.0, 0.0, 0.0, [1, 2]]], 2, "actions")
    with pytest.raises(TypeError, match=r"^actions\[1\]: got float 0.0, expected a sequence of 5"):
        codec.check([[0.0] * 5, 0.0], 2, "actions")
    with pytest.raises(
        TypeError, match=r"^actions\[0\]: got list \[0.0, 0.0\], expected 5 entries"
    ):
        codec.check([[0.0, 0.0], [0.0] * 5], 2, "actions")
    with pytest.raises(ValueError, match=r"^actions: got shape \(3, 5\), expected \(2, 5\)$"):
        codec.check(np.zeros((3, 5)), 2, "actions")


@pytest.mark.parametrize(
    "action",
    [
        np.zeros(5, dtype=np.float16),
        np.zeros(5, dtype=np.int8),
        np.zeros(5, dtype=np.uint64),
        [0, 0.5, -1, 1, 7],  # a list of Python numbers
        np.array([0, 0, 0, 0, 1], dtype=object).astype(float),
    ],
)
def test_check_accepts_every_int_and_float_array(action: object) -> None:
    a = ActionCodec(**PER).check(action)
    assert a.shape == (5,)
    ActionCodec(**PER).decode(a[None])  # and decodes


@pytest.mark.parametrize(
    ("kwargs", "action", "message"),
    [
        (
            PER,
            [[0, 0, 0, 0, np.nan]],
            "action[promote]: got nan, expected a number in [-1, 1] (not NaN or inf",
        ),
        (
            PER,
            [[0, -np.inf, 0, 0, 0]],
            "action[weight t0 n1]: got -inf, expected a number in [-1, 1]",
        ),
        (PER, [[0] * 5, [0, 0, np.nan, 0, 0]], "action[weight t1 n0] of instance 1: got nan"),
        (
            MODES,
            [[0, 0, 0, 0, 0, np.nan]],
            "action[mode]: got nan, expected a number in [-1, 1] (not NaN or inf)",
        ),
        (MODES, [[0] * 6, [0, 0, 0, 0, 0, np.inf]], "action[mode] of instance 1: got inf"),
        (
            {**PER, "action_type": "discrete"},
            [[0, 0, 0, 0, 7]],
            "action[promote]: got 7, expected 0 <= a < 7 (choices out of range)",
        ),
        (
            {**PER, "action_type": "discrete"},
            [[0, 8, 0, 0, 0]],
            "action[weight t0 n1]: got 8, expected 0 <= a < 8 (choices out of range)",
        ),
        (
            {**PER, "action_type": "discrete"},
            np.array([[0, 0, 0, 2**63 + 1, 0]], dtype=np.uint64),
            "action[weight t1 n1]: got 9223372036854775809, expected 0 <= a < 8",
        ),
        (
            {**PER, "action_type": "discrete"},
            [[0, 0, 0, 0, 1.5]],
            "action[promote]: got 1.5, expected an integer choice (not NaN, inf or a fraction)",
        ),
        (
            {**PER, "action_type": "discrete"},
            [[0, 0, np.nan, 0, 0]],
            "action[weight t1 n0]: got nan, expected an integer choice",
        ),
        (
            {**MODES, "action_type": "discrete"},
            [[0, 0, 0, 0, 0, 2]],
            "action[mode]: got 2, expected 0 <= a < 2 (tiering mode choices out of range)",
        ),
        (
            {**MODES, "action_type": "discrete"},
            [[0, 0, 0, 0, 0, -1]],
            "action[mode]: got -1, expected 0 <= a < 2",
        ),
    ],
)
def test_decode_names_the_bad_value_and_what_was_expected(
    kwargs: dict[str, Any], action: object, message: str
) -> None:
    with pytest.raises(ValueError) as exc:
        ActionCodec(**kwargs).decode(np.array(action))
    text = str(exc.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_decode_takes_whole_floats_as_choices_and_clips_huge_finite_box_entries() -> None:
    disc = ActionCodec(**{**MODES, "action_type": "discrete"})
    act, w = disc.decode(np.array([[1.0, 2.0, 0.0, 0.0, 6.0, 1.0]]))
    assert w[0].tolist() == [[1, 2], [0, 0]] and act.promote_mbps[0] == RATE_LEVELS_MBPS[6]
    assert disc.decode_mode(np.array([[1.0, 2.0, 0.0, 0.0, 6.0, 1.0]])).tolist() == [1]
    box = ActionCodec(**MODES)
    a = np.array([[0, 0, 0, 0, 0, 1e308], [0, 0, 0, 0, 0, 1e308]])
    box.decode(a)
    assert box.decode_mode(a).tolist() == [1, 1]


def test_checking_leaves_a_good_step_as_fast_as_before() -> None:
    """The checks are on the dtype and the shape (and vectorised isfinite over the values in
    decode): no Python loop over the entries. ``check`` of a good action costs about as much as the
    ``np.asarray`` it replaces (both well under 10 us here)."""
    import timeit

    codec = ActionCodec(4, 3, modes=("default", "tpp"))
    a = np.zeros(codec.size, dtype=np.float32)
    t = min(timeit.repeat(lambda: codec.check(a), number=2000, repeat=5)) / 2000
    assert t < 10e-6, t


@pytest.mark.parametrize(
    ("make", "bad", "error", "message"),
    [
        ("single", [0.0, 0.0, 0.0, 0.0, "x"], TypeError, "action[promote]: got str 'x'"),
        (
            "single",
            [0.0, 0.0, 0.0, 0.0, [0.5, 0.5]],
            TypeError,
            "action[promote]: got list [0.5, 0.5], expected one number",
        ),
        ("single", None, TypeError, "action: got NoneType None"),
        ("single", {"promote": 0.5}, TypeError, "action: got dict"),
        ("single", 0.5, ValueError, "action: got shape (), expected (5,)"),
        (
            "single",
            np.zeros(5, dtype=complex),
            TypeError,
            "action: got an array of complex numbers",
        ),
        (
            "single",
            np.array([0, 0, 0, 0, np.nan], dtype=np.float32),
            ValueError,
            "action[promote]: got nan",
        ),
        ("vector", [[0.0, 0.0, 0.0, 0.0, "x"]] * 2, TypeError, "actions[0][promote]: got str 'x'"),
        (
            "vector",
            [[0.0] * 5, [0.0, [1.0], 0.0, 0.0, 0.0]],
            TypeError,
            "actions[1][weight t0 n1]: got list [1.0]",
        ),
        (
            "vector",
            np.zeros((2, 5), dtype=object),
            TypeError,
            "actions: got an array of Python objects",
        ),
        ("vector", np.zeros(5), ValueError, "actions: got shape (5,), expected (2, 5)"),
        (
            "vector",
            [[0.0] * 5, [0.0, 0.0, np.inf, 0.0, 0.0]],
            ValueError,
            "action[weight t1 n0] of instance 1: got inf",
        ),
        ("discrete", [0, 0, 0, 0, "1"], TypeError, "action[promote]: got str '1'"),
        (
            "discrete",
            [0, 0, 0, 0, 9],
            ValueError,
            "action[promote]: got 9, expected 0 <= a < 7 (choices out of range)",
        ),
        (
            "discrete",
            [0, 0, 0, 0, 0.5],
            ValueError,
            "action[promote]: got 0.5, expected an integer choice",
        ),
        (
            "discrete",
            [0, -1, 0, 0, 0],
            ValueError,
            "action[weight t0 n1]: got -1, expected 0 <= a < 8",
        ),
        ("discrete", np.zeros(5, dtype=bool), TypeError, "action: got an array of bools"),
    ],
)
def test_environments_give_one_line_errors_for_bad_actions(
    make: str, bad: object, error: type[Exception], message: str
) -> None:
    """gym.make's single environment (box and discrete) and the native vector environment:
    every bad action is a TypeError or ValueError of one line naming the field, raised before
    the state changes (the next good step runs)."""
    import gymnasium as gym

    import envs

    if make == "vector":
        env: object = envs.TieredMemoryVecEnv(num_envs=2, scenario="colocation")
        good: object = np.zeros((2, 5), dtype=np.float32)
    else:
        kind = "discrete" if make == "discrete" else "box"
        env = gym.make(envs.ENV_ID, scenario="colocation", action_type=kind)
        good = np.zeros(5, dtype=np.int64 if kind == "discrete" else np.float32)
    env.reset(seed=0)  # type: ignore[attr-defined]
    with pytest.raises(error) as exc:
        env.step(bad)  # type: ignore[attr-defined]
    text = str(exc.value)
    assert text.startswith(message) and "\n" not in text, text
    env.step(good)  # type: ignore[attr-defined]
