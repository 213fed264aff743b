"""The catalogue of policies: each policy declared once, every list of policies a query of it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agents.config import RunOptions, TrainingError, check
from agents.evaluation import load_policy, make_reference
from agents.oracles import ORACLE_HEURISTICS
from baselines import catalogue, make_policy, policy_names
from envs.plugins import make_baseline_policy

ROOT = Path(__file__).resolve().parents[2]


def test_every_entry_builds_under_its_name() -> None:
    for e in catalogue.CATALOGUE:
        policy = make_reference(e.name)
        assert policy.name == e.name
        assert e.source, e.name
        assert (e.bound is not None) == (e.kind == "upper-bound"), e.name
        assert not (e.kind == "heuristic" and not e.deployable), e.name


def test_queries() -> None:
    heuristics = catalogue.names(kind="heuristic")
    assert {"dram-first", "memcg-fair", "caption", "damon-tiering", "colloid"} <= set(heuristics)
    assert "planner" not in heuristics and "random" not in heuristics
    assert catalogue.names(kind="heuristic", deployable=True) == heuristics
    assert list(ORACLE_HEURISTICS) == heuristics
    assert catalogue.names(closing=True) == ["best-heuristic-per-episode", "planner", "mpc"]
    assert set(catalogue.names(kind="upper-bound")) == {
        "static-best",
        "best-heuristic-per-episode",
        "planner",
        "mpc",
    }
    # a selector picks among the heuristics: never one of "the single heuristics"
    assert catalogue.names(kind="selector") == ["adaptive"]
    assert "adaptive" not in heuristics and catalogue.entry("adaptive").deployable
    # make_policy builds this package's policies; the others are evaluation's
    assert policy_names()[:-1] == catalogue.names(module="baselines.")
    with pytest.raises(ValueError, match="unknown policy 'static-best'"):
        make_policy("static-best")
    with pytest.raises(ValueError, match="kind"):
        catalogue.names(kind="oracle")


def test_reward_baselines_are_what_the_environment_accepts() -> None:
    for name in catalogue.names():
        if catalogue.entry(name).reward_baseline:
            assert make_baseline_policy(name).name == name
    with pytest.raises(ValueError, match="clairvoyant"):
        make_baseline_policy("planner")
    assert "planner" not in catalogue.names(reward_baseline=True)


def test_run_references_default_to_every_deployable_heuristic() -> None:
    opts = check(RunOptions, {}, "the command line")
    assert opts.reference_names() == [
        *catalogue.names(kind="heuristic", deployable=True),
        "adaptive",
    ]
    opts = check(RunOptions, {"references": "tpp,static:3:1"}, "the command line")
    assert opts.reference_names() == ["tpp", "static:3:1"]
    with pytest.raises(TrainingError, match=r"references.*unknown policy 'tp'"):
        check(RunOptions, {"references": "tpp,tp"}, "the command line")


def test_a_host_view_recipe_runs_global_weights_against_host_policies() -> None:
    """A recipe's env.weights is the task's unless --weights is given; a run on the host
    view is compared by default with the policies a host can run."""
    from agents.config.load import resolve

    host = ["env.weights=global", "env.observation=host"]
    cfg = resolve(check(RunOptions, {"recipe": "ppo", "set": host}, "the command line"))
    assert cfg.task.weights == "global" and cfg.env["weights"] == "global"
    assert "weights" not in cfg.recipe.env.given()  # recorded once, in the task
    assert cfg.references == catalogue.names(host=True) and "caption" not in cfg.references
    flag = {"recipe": "ppo", "weights": "per-tenant", "set": host}
    assert resolve(check(RunOptions, flag, "the command line")).task.weights == "per-tenant"
    plain = resolve(check(RunOptions, {"recipe": "ppo"}, "the command line"))
    assert plain.task.weights == "per-tenant" and "adaptive" in plain.references


def test_load_policy_names_and_labels() -> None:
    policy, kw = load_policy("best=best-heuristic-per-episode")
    assert policy.name == "best" and kw == {}
    with pytest.raises(Exception, match="unknown policy 'nope'"):
        load_policy("nope")


def test_register_adds_a_queryable_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue, "CATALOGUE", list(catalogue.CATALOGUE))
    e = catalogue.PolicyEntry(
        "my-dram-first", "heuristic", "baselines.policies:LocalFirst", "a test", deployable=True
    )
    catalogue.register(e)
    assert "my-dram-first" in catalogue.names(kind="heuristic")
    with pytest.raises(ValueError, match="already registered"):
        catalogue.register(e)
    with pytest.raises(ValueError, match="module:attribute"):
        catalogue.register(
            catalogue.PolicyEntry("x", "heuristic", "no-colon", "a test", deployable=True)
        )


def _name_lists(path: Path, known: set[str]) -> list[str]:
    """Literal lists, tuples and sets in ``path`` holding four or more policy names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            found = [
                e.value
                for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in known
            ]
            if len(found) >= 4:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {found}")
    return out


def test_no_policy_list_is_kept_by_hand() -> None:
    """Each policy's name is written once outside tests: in the catalogue."""
    known = set(catalogue.names())
    found = []
    for pkg in ("agents", "baselines", "envs"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            if f.name != "catalogue.py":
                found += _name_lists(f, known)
    assert found == []


def test_every_entry_follows_the_policy_protocols() -> None:
    """A catalogue policy is stepped (Policy) or makes its records from others' (RecordsPolicy);
    the clairvoyant ones say so (Clairvoyant) and are never reward baselines."""
    from envs.policy import Clairvoyant, Policy, RecordsPolicy, members

    assert members(Policy) == ["bind", "kernel", "name", "observe", "predict", "tiering_modes"]
    for e in catalogue.CATALOGUE:
        p = make_reference(e.name)
        assert isinstance(p, Policy) != isinstance(p, RecordsPolicy), e.name
        # mpc takes the episodes' seeds through the same hook, to keep a copy of the
        # environment's present state (it reads no future: tests/baselines/test_mpc.py)
        assert isinstance(p, Clairvoyant) == (e.bound in ("clairvoyant", "model")), e.name
        if e.reward_baseline:
            assert isinstance(p, Policy) and not isinstance(p, Clairvoyant), e.name
    assert not isinstance(object(), Policy)


def test_the_catalogue_says_how_each_policy_runs_on_a_host() -> None:
    """deploy.py reads its roles here: a heuristic runs on a host or says why not; the
    bounds never do; a static spec without a rate leaves the rate limit alone."""
    runnable = catalogue.names(host=True)
    assert set(runnable) <= set(catalogue.names(kind="heuristic"))
    assert {"dram-first", "weighted-interleave", "numa-tiering"} <= set(runnable)
    for name in catalogue.names():
        role = catalogue.host_role(name)
        assert (role.refused is None) == (name in runnable)
        assert role.refused or role.how, name
    assert "caption" not in runnable  # tenant performance is not observable on a host
    assert "promote_rate" in catalogue.host_role("static:3:1@256").knobs
    assert "promote_rate" not in catalogue.host_role("static:3:1").knobs
    with pytest.raises(ValueError, match="unknown policy"):
        catalogue.host_role("nope")
