"""Scenario families' splits (envs.families, envs.generator): ``train``, ``val`` and ``test``
are disjoint, ``train`` and ``test`` are the scenarios they were before ``val`` existed, and
every family has all three."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from envs import core
from envs import generator as G
from envs.families import FAMILY_NAMES, REPORT_SPLIT, SELECT_SPLIT, SPLITS, make_family
from envs.scenario import Scenario, load_scenario, scenario_names

#: Indices looked at per split for disjointness: every family's default pool is 512, and the
#: evaluations draw an index of that pool per episode.
POOL = 512


def fingerprint(sc: Scenario) -> str:
    """What a scenario's draws made of it: interval, episode length, kernel options, each
    node's name, kind, socket and capacity, and every tenant's keys (defaults left out), so
    that a fitted parameter added to the node schema or a new tenant key with a default does
    not change it, and any drawn value does."""
    d = {
        "interval_s": sc.interval_s,
        "episode_steps": sc.episode_steps,
        "kernel": None
        if sc.kernel is None
        else sc.kernel.model_dump(mode="json", exclude_defaults=True),
        "nodes": [[n.name, n.kind, n.socket, n.capacity_gib] for n in sc.hardware.nodes],
        "tenants": [t.model_dump(mode="json", exclude_defaults=True) for t in sc.tenants],
    }
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


#: ``fingerprint`` of scenarios on the commit before ``val`` (33406c0): train and test must
#: stay these, the project's recorded figures were drawn from them.
BEFORE_VAL = [
    ("mixed", "train", 0, "aa8067f6f6e939f9"),
    ("mixed", "train", 7, "cbf8ea1e3be3abdb"),
    ("mixed", "train", 511, "e93d0b6d4651da7f"),
    ("mixed", "test", 0, "ab61550ebb8a6135"),
    ("mixed", "test", 7, "6f8da43c162aee1e"),
    ("mixed", "test", 511, "eba3fabe7cbe82b0"),
    ("mixed-2s", "train", 0, "de629f45b655360d"),
    ("mixed-2s", "train", 7, "77a1aa624182270d"),
    ("mixed-2s", "train", 511, "0a3f882283bf2a3a"),
    ("mixed-2s", "test", 0, "55addc1b4a71d445"),
    ("mixed-2s", "test", 7, "b541c539c0a4cf3c"),
    ("mixed-2s", "test", 511, "f9995de52fb69560"),
    ("mixed-4cxl", "train", 0, "887bdf514cbac3bc"),
    ("mixed-4cxl", "train", 7, "e6c6c356a2bbea42"),
    ("mixed-4cxl", "train", 511, "09cf9ece776efbc1"),
    ("mixed-4cxl", "test", 0, "99c98bf62192b7cf"),
    ("mixed-4cxl", "test", 7, "ad97a4d5c553153f"),
    ("mixed-4cxl", "test", 511, "518e5ecf3040c16d"),
    ("gen-1s-1cxl", "train", 0, "687a11e1805785ba"),
    ("gen-1s-1cxl", "train", 7, "630ec8abc9cce50c"),
    ("gen-1s-1cxl", "train", 511, "3274619c7de0e197"),
    ("gen-1s-1cxl", "test", 0, "fcac9e3709e31942"),
    ("gen-1s-1cxl", "test", 7, "ee3b40ce91d196ef"),
    ("gen-1s-1cxl", "test", 511, "636365b678e4eb64"),
    ("gen-1s-4cxl", "train", 0, "91081b587649dd67"),
    ("gen-1s-4cxl", "train", 7, "fd21e4d38191fd75"),
    ("gen-1s-4cxl", "train", 511, "e4484db54d31bcab"),
    ("gen-1s-4cxl", "test", 0, "6971877623fb65ff"),
    ("gen-1s-4cxl", "test", 7, "f535c73360d8e761"),
    ("gen-1s-4cxl", "test", 511, "3f0ca45d203d31ce"),
    ("gen-2s-snc", "train", 0, "de2c7d156dc5226d"),
    ("gen-2s-snc", "train", 7, "dc7199923ff6edf2"),
    ("gen-2s-snc", "train", 511, "01b09c3c5cd98652"),
    ("gen-2s-snc", "test", 0, "1997f4f540758f44"),
    ("gen-2s-snc", "test", 7, "61f41714a2ae455d"),
    ("gen-2s-snc", "test", 511, "f32f57a055e4bf3e"),
    ("gen-2s-snc-2cxl", "train", 0, "bdff7e1cec9e5b74"),
    ("gen-2s-snc-2cxl", "train", 7, "8bca6f96604c3e80"),
    ("gen-2s-snc-2cxl", "train", 511, "d33f01e934c5f06a"),
    ("gen-2s-snc-2cxl", "test", 0, "4a9d4cfbd3bce29d"),
    ("gen-2s-snc-2cxl", "test", 7, "26fa409cc0c11004"),
    ("gen-2s-snc-2cxl", "test", 511, "44fd5903ffd8de89"),
    ("unseen-2s-1cxl-llm", "train", 0, "e3359d3fed141639"),
    ("unseen-2s-1cxl-llm", "train", 7, "f25eb2e82bb33bb1"),
    ("unseen-2s-1cxl-llm", "train", 511, "08bab662e50df58b"),
    ("unseen-2s-1cxl-llm", "test", 0, "dff598cf32f34132"),
    ("unseen-2s-1cxl-llm", "test", 7, "429545dd2a8b74b9"),
    ("unseen-2s-1cxl-llm", "test", 511, "e6ecaea50b34ea3d"),
]


@pytest.mark.parametrize(("family", "split", "index", "want"), BEFORE_VAL)
def test_train_and_test_are_the_scenarios_they_were(
    family: str, split: str, index: int, want: str
) -> None:
    assert fingerprint(make_family(family, pool_size=8).scenario(split, index)) == want


def test_the_splits_and_their_roles() -> None:
    assert SPLITS == ("train", "val", "test")
    assert SELECT_SPLIT == "val" and REPORT_SPLIT == "test"
    with pytest.raises(ValueError, match="split: got 'validation'"):
        make_family("mixed", pool_size=8).scenario("validation", 0)
    with pytest.raises(ValueError, match="split: got 'dev'"):
        G.generated_scenario("1s-1cxl", "dev", 0)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_family_has_a_val_split_disjoint_from_train_and_test(family: str) -> None:
    fam = make_family(family, pool_size=8)
    n = POOL if family.startswith("mixed") else 96  # the generator's are slower to draw
    prints = {s: [fingerprint(fam.scenario(s, i)) for i in range(n)] for s in SPLITS}
    val = set(prints["val"])
    assert len(val) == n  # no two val scenarios alike either
    assert not val & set(prints["train"]), family
    assert not val & set(prints["test"]), family
    assert not set(prints["train"]) & set(prints["test"]), family
    sc = fam.scenario("val", 3)
    assert sc.name.endswith("-val-3") and sc == fam.scenario("val", 3)  # deterministic
    assert [n.name for n in sc.hardware.nodes] == fam.node_names  # one layout with the others


@pytest.mark.slow
def test_the_generators_splits_are_disjoint_over_a_whole_default_pool() -> None:
    """The generator's families over every index of a default pool (512), every split: no
    scenario of one split is a scenario of another (about 2 minutes)."""
    for family in [n for n in FAMILY_NAMES if not n.startswith("mixed")]:
        fam = make_family(family, pool_size=8)
        seen: dict[str, str] = {}
        for split in SPLITS:
            for i in range(POOL):
                key = G.content_key(fam.scenario(split, i))
                assert seen.setdefault(key, split) == split, (family, split, i)


def test_the_val_pool_compiles_and_steps() -> None:
    params = core.make_params("gen-2s-snc-2cxl", split="val", pool_size=4, max_tenants=4)
    state, obs = core.reset(params, np.arange(4, dtype=np.uint64))
    act = np.zeros((4, params.codec.size), dtype=np.float32)
    state, obs, reward = core.step(params, state, act)[:3]
    assert np.all(np.isfinite(reward)) and np.all(np.isfinite(obs))
    train = core.make_params("gen-2s-snc-2cxl", split="train", pool_size=4, max_tenants=4)
    assert params.family is train.family  # one family object, a pool per split


# --------------------------------------------------------------------------- coverage: broad-*

#: Draws per family in the coverage tests.
DRAWS = 200


def _nearest_shape(sc: Scenario) -> str:
    """The broad shape of ``sc``'s machine: the same nodes (kind and socket, in order), and
    of those the DRAM part nearest in bandwidth (an SNC node or a whole socket)."""
    import math

    parts = G._parts()
    layout = [(n.kind, n.socket) for n in sc.hardware.nodes]
    dram_gbps = max(n.read_gbps for n in sc.hardware.nodes if n.kind == "dram")
    best, gap = "", math.inf
    for name, shape in G.BROAD_SHAPES.items():
        kinds = [(parts[p].get("kind", "dram" if p in G.DRAM_GIB else "cxl"), s)
                 for p, s in shape.nodes]  # fmt: skip
        if kinds != layout:
            continue
        d = abs(math.log(parts[shape.nodes[0][0]]["read_gbps"] / dram_gbps))
        if d < gap:
            best, gap = name, d
    assert best, f"{sc.name}: no broad shape has its nodes"
    return best


def _kind(tenant_name: str) -> str:
    return tenant_name.rstrip("0123456789")


def _motif(sc: Scenario) -> str:
    return sc.description.split("(", 1)[1].split(")", 1)[0]


def test_the_shipped_scenarios_features() -> None:
    """What :func:`envs.generator.features` sees in the shipped scenarios it was written for."""
    f = {n: G.features(load_scenario(n)) for n in scenario_names()}
    assert {"stream", "rw-phase", "several-cxl"} <= f["mlc-bandwidth"]
    assert {"two-sockets", "both-sockets", "snc", "near-cxl", "far-cxl", "spill-multi-dram",
            "stream"} <= f["cxl-spill"]  # fmt: skip
    assert f["cxl-spill-prefix"] == f["cxl-spill"] | {"pre-2021"}
    assert {"bind-remote", "snc", "stream"} <= f["fallback-hotspot"]
    assert "both-sockets" not in f["fallback-hotspot"]  # both tenants run on socket 1
    assert {"latecomer", "latecomer-limits", "tier-aware"} <= f["tiering-fairness-low-high"]
    assert "latecomer-limits" not in f["tiering-fairness"] and "latecomer" in f["tiering-fairness"]
    assert "thread-ramp" in f["llm-inference"] and "stream" not in f["kv-store"]
    assert f["tiering-fairness-alone"] == {"near-cxl"}
    assert set().union(*f.values()) == set(G.FEATURES)  # every feature named is shown somewhere


@pytest.mark.parametrize("shape", list(G.BROAD_SHAPES))
def test_broad_draws_every_situation_and_trained_kind_and_no_held_out_one(shape: str) -> None:
    fam = make_family(f"broad-{shape}", pool_size=8)
    held = set(G.held_out_kinds(shape))
    motifs: set[str] = set()
    kinds: set[str] = set()
    for i in range(DRAWS):
        sc = fam.scenario("train", i)
        motifs.add(_motif(sc))
        kinds |= {_kind(t.name) for t in sc.tenants}
        assert [n.name for n in sc.hardware.nodes] == fam.node_names
        assert 1 <= len(sc.tenants) <= G.MAX_TENANTS
        assert all(1 + len(t.phases) <= G.MAX_PHASES for t in sc.tenants)
    assert motifs == set(G.motifs(shape))
    assert "bind" in motifs or G.BROAD_SHAPES[shape].sockets == 1
    assert not kinds & held
    assert kinds == set(G.KINDS) - held


def test_broad_draws_what_every_shipped_scenario_shows() -> None:
    """For each shipped scenario, some of the first DRAWS scenarios of ``broad-<its shape>``
    show every feature it shows at once, and each feature has a positive share; before
    ``broad-*``, ``gen-*`` drew some of them never (mlc-bandwidth's mix change on a saturated
    socket, fallback-hotspot-prefix's remote bind with the old fallback lists)."""
    shape_of = {n: _nearest_shape(load_scenario(n)) for n in scenario_names()}
    assert {"1s-4cxl", "2s-snc", "2s-snc-2cxl"} <= set(shape_of.values())
    drawn = {
        s: [G.features(G.broad_scenario(s, "train", i)) for i in range(DRAWS)]
        for s in set(shape_of.values())
    }
    for name, shape in shape_of.items():
        want = G.features(load_scenario(name))
        assert any(want <= got for got in drawn[shape]), (name, sorted(want))
    shares = G.coverage("broad-1s-4cxl", DRAWS)
    assert shares["rw-phase"] > 0.1 and shares["stream"] > 0.3
    assert G.coverage("gen-1s-4cxl", DRAWS)["rw-phase"] == 0.0  # what broad adds


@pytest.mark.parametrize("shape", ["1s-4cxl", "1s-2cxl"])
def test_broad_bandwidth_streams_reach_what_their_kind_can_ask(shape: str) -> None:
    """The bandwidth situation's stream asks from 1.2x its DRAM node's peak up to the most its
    kind can ask (every thread at its most misses in flight), at least 3x: on a whole socket
    (mlc-bandwidth's 64 MLC threads ask about 4x) some draws pass 3.6x, where the draws
    stopped at 3x before (3.4x with the threads rounded up), and none passes the kind's most."""
    factors = []
    for i in range(DRAWS):
        sc = G.broad_scenario(shape, "train", i)
        if _motif(sc) != "bandwidth":
            continue
        t = sc.tenants[0]
        node = next(n for n in sc.hardware.nodes if n.name == t.cpu_node)
        peak = max(node.read_gbps, node.mixed_gbps)
        demand = t.threads * t.mlp * 64.0 / (t.compute_ns + node.idle_latency_ns)
        most = G._most_demand_gbps("hog", t.compute_ns, node.idle_latency_ns)
        assert demand <= most * (1 + 1e-9), (sc.name, demand, most)
        factors.append(demand / peak)
    assert len(factors) >= 20
    assert min(factors) >= 1.2 * (1 - 1e-9)
    assert max(factors) > 3.6


def test_no_generated_scenario_is_a_shipped_one() -> None:
    shipped = {G.content_key(load_scenario(n)) for n in scenario_names()}
    assert len(shipped) == len(scenario_names())  # the key tells them apart
    for family in FAMILY_NAMES:
        fam = make_family(family, pool_size=8)
        n = 64 if family.startswith("mixed") else 40
        for split in SPLITS:
            for i in range(n):
                assert G.content_key(fam.scenario(split, i)) not in shipped, (family, split, i)


def test_a_broad_draw_that_is_a_shipped_scenario_is_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = G.broad_scenario("2s-snc", "train", 5)
    shipped = frozenset({G.content_key(first)})
    monkeypatch.setattr(G, "_shipped_keys", lambda: shipped)
    again = G.broad_scenario("2s-snc", "train", 5)
    assert again.name == first.name and G.content_key(again) != G.content_key(first)
    monkeypatch.setattr(G, "_shipped_keys", lambda: _Everything())
    with pytest.raises(RuntimeError, match="16 draws were shipped scenarios"):
        G.broad_scenario("2s-snc", "train", 5)


class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


@pytest.mark.parametrize("family", G.broad_family_names())
def test_broad_scenarios_are_valid_and_step(family: str) -> None:
    """Each one loads back through the scenario validator as itself; its pool compiles and
    steps with finite outputs."""
    fam = make_family(family, pool_size=8)
    for i in range(40):
        sc = fam.scenario("val", i)
        assert load_scenario(sc.model_dump(mode="json", exclude_none=True)) == sc
        dram = [n.capacity_gib for n in sc.hardware.nodes if n.kind == "dram"]
        assert all(8.0 <= c <= 476.8 for c in dram)
        for t in sc.tenants:
            r = G.KINDS[_kind(t.name)]
            lo, hi = r["threads"]
            assert lo <= t.threads <= hi, (sc.name, t.name)
            assert 0 < t.working_set_gib <= r["working_set_gib"][1]
            assert t.memory_low_gib <= t.working_set_gib
    params = core.make_params(family, split="val", pool_size=4, max_tenants=4)
    state, obs = core.reset(params, np.arange(4, dtype=np.uint64))
    rng = np.random.default_rng(0)
    for _ in range(3):
        act = rng.uniform(-1, 1, size=(4, params.codec.size)).astype(np.float32)
        state, obs, reward = core.step(params, state, act)[:3]
        assert np.all(np.isfinite(reward)) and np.all(np.isfinite(obs)), family


def test_broad_is_a_group_and_takes_chances() -> None:
    assert G.expand_family_names(["broad"]) == G.broad_family_names()
    plain = make_family("broad-2s-2cxl", pool_size=8)
    low = make_family("broad-2s-2cxl", pool_size=8, generator_chances={"memory_low": 1.0})
    assert low is not plain
    lows = [t.memory_low_gib > 0 for i in range(30) for t in low.scenario("train", i).tenants]
    base = [t.memory_low_gib > 0 for i in range(30) for t in plain.scenario("train", i).tenants]
    assert np.mean(lows) > np.mean(base)
    with pytest.raises(ValueError, match="shape: got '3s'"):
        G.broad_scenario("3s", "train", 0)
