"""The scenario generator (envs.generator): its splits, its held-out cells, its ranges, and
the shipped scenarios as points of its space."""

from __future__ import annotations

import numpy as np
import pytest

from envs import generator as G
from envs.families import make_family
from envs.scenario import load_scenario, scenario_names

N = 120  # scenarios per split looked at


def _kind(tenant_name: str) -> str:
    return tenant_name.rstrip("0123456789")


def test_deterministic_and_splits_disjoint() -> None:
    a = G.generated_scenario("2s-2cxl", "train", 7).model_dump_json()
    assert a == G.generated_scenario("2s-2cxl", "train", 7).model_dump_json()
    for shape in G.SHAPES:
        train = {
            G.generated_scenario(shape, "train", i).model_dump_json(exclude={"name"})
            for i in range(40)
        }
        test = {
            G.generated_scenario(shape, "test", i).model_dump_json(exclude={"name"})
            for i in range(40)
        }
        assert not train & test, shape


@pytest.mark.parametrize("shape", list(G.SHAPES))
def test_training_never_draws_a_held_out_cell(shape: str) -> None:
    held = set(G.held_out_kinds(shape))
    seen: set[str] = set()
    for split in ("train", "test"):
        for i in range(N):
            sc = G.generated_scenario(shape, split, i)
            kinds = {_kind(t.name) for t in sc.tenants}
            assert not kinds & held, (sc.name, kinds & held)
            seen |= kinds
    assert seen == set(G.KINDS) - held  # every other kind is drawn on the shape


def test_unseen_families_are_their_cell_and_nothing_else_is_held_out() -> None:
    assert len(G.HELD_OUT) == len(set(G.HELD_OUT)) == len(G.unseen_family_names())
    for (shape, kind), name in zip(G.HELD_OUT, G.unseen_family_names(), strict=True):
        fam = make_family(name, pool_size=8)
        for i in range(30):
            sc = fam.scenario("test", i)
            assert _kind(sc.tenants[0].name) == kind
            assert [n.name for n in sc.hardware.nodes] == fam.node_names
        assert fam.node_names == make_family(f"gen-{shape}", pool_size=8).node_names
    # every kind is trained on some shape and every shape with some kinds
    trained_kinds = {k for s in G.SHAPES for k in G.KINDS if k not in G.held_out_kinds(s)}
    assert trained_kinds == set(G.KINDS)


def test_group_names_expand_in_order_without_repeats() -> None:
    got = G.expand_family_names(["mixed", "generator", "gen-1s-1cxl", "unseen"])
    assert got == ["mixed", *G.generator_family_names(), *G.unseen_family_names()]
    with pytest.raises(ValueError, match="group 'generator'"):
        make_family("generator")


def _within(value: float, spec: list[float] | tuple[float, float], slack: float = 1e-9) -> bool:
    if isinstance(spec, list):
        return value in spec
    lo, hi = spec
    return lo - slack <= value <= hi + slack


def test_generated_tenants_lie_in_their_kinds_ranges() -> None:
    for shape in G.SHAPES:
        for i in range(N):
            sc = G.generated_scenario(shape, "train", i)
            for t in sc.tenants:
                r = G.KINDS[_kind(t.name)]
                assert _within(t.threads, r["threads"]), (sc.name, t.name)
                assert _within(t.mlp, r["mlp"]) and _within(t.read_fraction, r["read_fraction"])
                hi = r["working_set_gib"][1]
                assert 0 < t.working_set_gib <= hi  # scaled down to fit a small machine
                assert t.memory_low_gib <= t.working_set_gib
                dram = [n.capacity_gib for n in sc.hardware.nodes if n.kind == "dram"]
                assert all(8.0 <= c <= 476.8 for c in dram)


def _local(node: dict) -> dict:
    return {k: v for k, v in node.items() if not k.startswith("remote_")}


def _matching_shape(sc: object) -> str | None:
    """The generator shape whose nodes (kind, socket and fitted parameters) ``sc`` runs on
    (a ``gen-*`` shape, or the one only ``broad-*`` draws)."""
    parts = G._parts()
    nodes = [n.model_dump(exclude_none=True) for n in sc.hardware.nodes]  # type: ignore[attr-defined]
    for name, shape in G.BROAD_SHAPES.items():
        if len(shape.nodes) != len(nodes):
            continue
        ok = True
        for (part, socket), node in zip(shape.nodes, nodes, strict=True):
            want = {k: v for k, v in parts[part].items() if k not in ("name", "capacity_gib")}
            got = {k: v for k, v in node.items() if k in want or k.startswith("remote_")}
            if shape.sockets == 1:  # a single socket has no remote side
                want, got = _local(want), _local(got)
            want["socket"] = socket
            got["socket"] = node["socket"]
            if want != got:
                ok = False
                break
            lo_hi = G.DRAM_GIB.get(part)
            cap = node["capacity_gib"]
            if lo_hi is not None and not lo_hi[0] <= cap <= lo_hi[1]:
                ok = False
            if lo_hi is None and cap not in G.CXL_GIB:
                ok = False
        if ok:
            return name
    return None


@pytest.mark.parametrize("name", scenario_names())
def test_every_shipped_scenario_is_a_point_of_the_generator(name: str) -> None:
    """Its machine is a generator shape (``gen-*``'s or ``broad-*``'s; capacities in range), its interval one the
    generator draws, and every tenant's starting parameters lie in some kind's ranges that
    the generator trains on that shape (episode length and phase schedules aside)."""
    sc = load_scenario(name)
    shape = _matching_shape(sc)
    assert shape is not None, f"{name}: no generator shape has its machine"
    assert sc.interval_s in [i for i, _ in G.INTERVALS]
    trained = [k for k in G.KINDS if k not in G.held_out_kinds(shape)]
    for t in sc.tenants:
        fits = []
        for k in trained:
            r = G.KINDS[k]
            hot = t.hotness.model_dump()
            if "zipf_s" in hot:
                hot_ok = "zipf_s" in r and _within(hot["zipf_s"], r["zipf_s"])
            else:
                hot_ok = "hot_fraction" in r and _within(hot["hot_fraction"], r["hot_fraction"])
                hot_ok = hot_ok and _within(hot["hot_access_fraction"], r["hot_access_fraction"])
            if (
                hot_ok
                and _within(t.threads, r["threads"])
                and _within(t.mlp, r["mlp"])
                and _within(t.compute_ns, r["compute_ns"])
                and _within(t.read_fraction, r["read_fraction"])
                and _within(t.working_set_gib, r["working_set_gib"])
            ):
                fits.append(k)
        assert fits, f"{name}: tenant {t.name} fits no kind trained on {shape}"


def test_every_family_compiles_and_steps() -> None:
    """Each family's pool compiles into one batch and steps with finite outputs."""
    from envs import core

    for name in [*G.generator_family_names(), *G.unseen_family_names()]:
        params = core.make_params(name, pool_size=4, max_tenants=4)
        state, obs = core.reset(params, np.arange(4, dtype=np.uint64))
        rng = np.random.default_rng(0)
        for _ in range(3):
            act = rng.uniform(-1, 1, size=(4, params.codec.size)).astype(np.float32)
            state, obs, reward = core.step(params, state, act)[:3]
            assert np.all(np.isfinite(reward)), name
            assert np.all(np.isfinite(obs)), name


def _share_with_high(chances: dict[str, float] | None, split: str = "train") -> float:
    tenants = [
        t
        for i in range(N)
        for t in G.generated_scenario("2s-snc-2cxl", split, i, chances=chances).tenants
    ]
    return float(np.mean([t.memory_high_gib is not None for t in tenants]))


def test_chances_change_what_is_drawn_and_only_that() -> None:
    base = G.generated_scenario("1s-2cxl", "train", 3).model_dump_json()
    assert G.generated_scenario("1s-2cxl", "train", 3, chances={}).model_dump_json() == base
    same = dict(G.CHANCES)
    assert G.generated_scenario("1s-2cxl", "train", 3, chances=same).model_dump_json() == base
    assert _share_with_high({"memory_high": 0.0}) == 0.0
    default = _share_with_high(None)
    assert 0.05 < default < 0.15  # CHANCES["memory_high"] = 0.1
    # every tenant draws one; it is kept where it lies above the tenant's memory.low
    assert _share_with_high({"memory_high": 1.0}) > 0.85
    assert default < _share_with_high({"memory_high": 0.3}) < 0.4
    # the machine is drawn before any chance: the same for every chance
    for i in range(10):
        a = G.generated_scenario("2s-2cxl", "test", i, chances={"memory_high": 1.0, "late": 0.0})
        b = G.generated_scenario("2s-2cxl", "test", i)
        assert a.hardware == b.hardware and a.interval_s == b.interval_s


@pytest.mark.parametrize(
    ("chances", "message"),
    [
        ({"memory_hi": 0.3}, "unknown chance 'memory_hi'"),
        (
            {"memory_high": 1.5},
            r"generator_chances.memory_high: got 1.5, expected a number in \[0, 1\]",
        ),
        ({"late": "often"}, r"generator_chances.late: got 'often'"),
        ({"stop": True}, r"generator_chances.stop: got True"),
    ],
)
def test_bad_chances_are_named(chances: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        G.generated_scenario("1s-1cxl", "train", 0, chances=chances)
    with pytest.raises(ValueError, match=message):  # also where no generator family is drawn
        make_family("mixed", pool_size=8, generator_chances=chances)


def test_a_family_drawn_with_other_chances_is_another_family_object() -> None:
    from envs import core

    plain = make_family("gen-2s-snc-2cxl", pool_size=8)
    assert make_family("gen-2s-snc-2cxl", pool_size=8, generator_chances={}) is plain
    assert make_family("gen-2s-snc-2cxl", pool_size=8, generator_chances=dict(G.CHANCES)) is plain
    high = make_family("gen-2s-snc-2cxl", pool_size=8, generator_chances={"memory_high": 1.0})
    assert high is not plain and high.name == plain.name
    assert high.scenario("train", 5) == G.generated_scenario(
        "2s-snc-2cxl", "train", 5, chances={"memory_high": 1.0}
    )
    # other families ignore it; the environment passes it on
    assert make_family("mixed", pool_size=8, generator_chances={"memory_high": 1.0}) is (
        make_family("mixed", pool_size=8)
    )
    p = core.make_params("gen-2s-snc-2cxl", pool_size=8, generator_chances={"memory_high": 1.0})
    assert p.family is high


def test_a_channel_draw_scales_only_the_dram_bandwidths_within_their_bounds() -> None:
    seen: dict[str, set[float]] = {}
    for shape in ("1s-1cxl", "1s-4cxl", "2s-snc-2cxl"):
        for i in range(24):
            drawn = G.generated_scenario(shape, "train", i, chances={"channels": 1.0})
            plain = G.generated_scenario(shape, "train", i)
            assert drawn.tenants == plain.tenants and drawn.interval_s == plain.interval_s
            part = G.SHAPES[shape].nodes[0][0]
            own, lo, hi = G.CHANNELS[part]
            scales = set()
            for a, b in zip(drawn.hardware.nodes, plain.hardware.nodes, strict=True):
                assert a.capacity_gib == b.capacity_gib and a.idle_latency_ns == b.idle_latency_ns
                if b.kind == "cxl":
                    assert a == b
                    continue
                scale = a.read_gbps / b.read_gbps
                assert lo / own - 1e-3 <= scale <= hi / own + 1e-3
                assert a.write_gbps == pytest.approx(scale * b.write_gbps, abs=0.01)
                if b.remote_read_gbps < 1e3:  # a fitted remote side (1e3: none, no limit)
                    assert a.remote_read_gbps == pytest.approx(scale * b.remote_read_gbps, abs=0.01)
                scales.add(round(scale, 3))
            assert len(scales) == 1  # one count per part: the machine's DRAM nodes stay alike
            seen.setdefault(shape, set()).update(scales)
    # every count of the bounds is drawn: 2..4 channels of an SNC node, 4..8 of a socket
    assert seen["1s-1cxl"] == seen["2s-snc-2cxl"] == {1.0, 1.5, 2.0}
    assert seen["1s-4cxl"] == {0.5, 0.625, 0.75, 0.875, 1.0}
    # at the default chance (0) nothing is drawn: the fitted parts, every scenario as before
    assert G.CHANCES["channels"] == 0.0
    half = [
        G.broad_scenario("1s-socket-1cxl", "val", i, chances={"channels": 0.5}) for i in range(24)
    ]
    kept = [sc == G.broad_scenario("1s-socket-1cxl", "val", i) for i, sc in enumerate(half)]
    assert 0 < sum(kept) < len(kept)


def test_near_peak_draws_the_bandwidth_situation_below_its_node_peak() -> None:
    demands, changed = [], 0
    for shape in ("1s-1cxl", "2s-2cxl", "1s-4cxl"):
        for i in range(40):
            drawn = G.broad_scenario(shape, "train", i, chances={"near_peak": 1.0})
            plain = G.broad_scenario(shape, "train", i)
            if "(bandwidth)" not in plain.description:
                assert drawn == plain  # only the bandwidth situation draws it
                continue
            changed += drawn != plain
            t = drawn.tenants[0]
            node = next(n for n in drawn.hardware.nodes if n.name == t.cpu_node)
            lo, hi = G.KINDS["hog"]["threads"]
            assert lo <= t.threads <= hi and t.mlp >= G.KINDS["hog"]["mlp"][0]
            zero_load = t.threads * t.mlp * 64.0 / (t.compute_ns + node.idle_latency_ns)
            demands.append(zero_load / max(node.read_gbps, node.mixed_gbps))
            # the default draw asks 1.2x the peak or more
            t0 = plain.tenants[0]
            assert t0.threads * t0.mlp * 64.0 / (t0.compute_ns + node.idle_latency_ns) > (
                1.15 * max(node.read_gbps, node.mixed_gbps)
            )
    assert changed == len(demands) > 10
    assert 0.5 - 0.02 <= min(demands) and max(demands) <= 1.0 + 0.02
    assert G.CHANCES["near_peak"] == 0.0
