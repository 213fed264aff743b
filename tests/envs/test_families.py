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
from envs.scenario import Scenario

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


def test_the_val_pool_compiles_and_steps() -> None:
    params = core.make_params("gen-2s-snc-2cxl", split="val", pool_size=4, max_tenants=4)
    state, obs = core.reset(params, np.arange(4, dtype=np.uint64))
    act = np.zeros((4, params.codec.size), dtype=np.float32)
    state, obs, reward = core.step(params, state, act)[:3]
    assert np.all(np.isfinite(reward)) and np.all(np.isfinite(obs))
    train = core.make_params("gen-2s-snc-2cxl", split="train", pool_size=4, max_tenants=4)
    assert params.family is train.family  # one family object, a pool per split
