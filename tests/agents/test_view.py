"""The agent's view (agents.view): residual actions, the tiering-mode action and visible
arrivals (issue #12, items 1-3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agents.evaluation import LearnedPolicy, PolicyError
from agents.rollout import rollout
from agents.view import (
    AgentInterface,
    ViewConfig,
    agent_spaces,
    make_training_vec_env,
    split_instances,
)
from baselines import make_policy
from baselines.placement import SHARE_TOP, dram_share
from envs import core
from envs.spaces import TIERING_MODES, ActionCodec

MODES = list(TIERING_MODES)
HEURISTICS = [
    "dram-first",
    "interleave",
    "weighted-interleave",
    "numa-tiering",
    "tpp",
    "memcg-fair",
    "colloid",
    "caption",
    "damon-tiering",
]


class ZeroModel:
    """A stand-in trained model whose every action is the zero residual."""

    def __init__(self, obs: Any, act: Any) -> None:
        self.observation_space, self.action_space = obs, act

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        return np.zeros((obs.shape[0], self.action_space.shape[0]), np.float32), state


class MixModel(ZeroModel):
    """A stand-in whose every action is residual 0 with the given mixing entries (the last)."""

    def __init__(self, obs: Any, act: Any, entries: list[float]) -> None:
        super().__init__(obs, act)
        self.entries = entries

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        a = np.zeros((obs.shape[0], self.action_space.shape[0]), np.float32)
        a[:, -len(self.entries) :] = self.entries
        return a, state


def _geomeans(recs: list[dict[str, Any]]) -> list[float]:
    return [r["metrics"]["geomean_perf"] for r in sorted(recs, key=lambda r: r["seed"])]


@pytest.mark.parametrize("scenario", ["colocation", "kv-store"])
def test_zero_residual_is_the_base_heuristic_exactly(scenario: str) -> None:
    """Every heuristic, replayed as the zero residual through the agent's action interface
    (default kernel, tiering mode chosen by the action), scores exactly what it scores
    natively with its own kernel settings: TPP's watermark, DAMON's quota, the throttle."""
    for name in HEURISTICS:
        kw = {"tiering_modes": MODES, "base_policy": name}
        params = core.make_params(scenario, split="test", tiering_modes=MODES, pool_size=8)
        pol = LearnedPolicy(ZeroModel(*agent_spaces(params, name)), kw, "zero", "test")
        residual = _geomeans(rollout(pol, scenario, 6, seed=3, env_kwargs=kw))
        native = _geomeans(rollout(name, scenario, 6, seed=3))
        assert residual == native, name
    if scenario == "kv-store":  # and the modes matter: TPP's settings are worth something
        tpp = np.mean(_geomeans(rollout("tpp", scenario, 6, seed=3)))
        plain = np.mean(_geomeans(rollout("numa-tiering", scenario, 6, seed=3)))
        assert tpp - plain > 0.005  # 0.846 vs 0.835 (per-task scanning; colocation: 0.001)


def test_a_residual_moves_the_action_and_the_score() -> None:
    """A constant residual on the CXL weight changes the weights in force and the score."""
    name, sc = "colloid", "colocation"
    kw = {"tiering_modes": MODES, "base_policy": name}
    params = core.make_params(sc, split="test", tiering_modes=MODES, pool_size=8)
    obs_space, act_space = agent_spaces(params, name)
    assert obs_space.shape == (params.encoder.size + params.codec.size,)

    class Push(ZeroModel):
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            a = np.zeros((obs.shape[0], self.action_space.shape[0]), np.float32)
            a[:, 1 : params.codec.n_weight_rows * params.n_nodes : params.n_nodes] = 1.0
            return a, state

    pushed = np.mean(
        _geomeans(
            rollout(LearnedPolicy(Push(obs_space, act_space), kw, "p", "t"), sc, 4, env_kwargs=kw)
        )
    )
    base = np.mean(_geomeans(rollout(name, sc, 4)))
    assert abs(pushed - base) > 0.01


def test_mixing_bases_follows_each_heuristic_exactly_at_the_corners() -> None:
    """With several bases the zero action is the first heuristic and a mixing entry of 1
    (the others at or under 0) is the heuristic it names, each scoring exactly its native
    score; entries in between blend the decisions; the observation carries every base
    action and the action one entry per extra base."""
    sc, names = "kv-store", ["colloid", "tpp", "dram-first"]
    kw = {"tiering_modes": MODES, "base_policy": names}
    params = core.make_params(sc, split="test", tiering_modes=MODES, pool_size=8)
    obs_space, act_space = agent_spaces(params, names)
    assert obs_space.shape == (params.encoder.size + 3 * params.codec.size,)
    assert act_space.shape == (params.codec.size + 2,)

    def score(entries: list[float]) -> tuple[list[float], Any]:
        pol = LearnedPolicy(MixModel(obs_space, act_space, entries), kw, "m", "t")
        return _geomeans(rollout(pol, sc, 3, seed=5, env_kwargs=kw)), pol.agent.mix

    native = {n: _geomeans(rollout(n, sc, 3, seed=5)) for n in names}
    assert native["tpp"] != native["dram-first"] != native["colloid"]
    for entries, want in [
        ([0.0, -1.0], "colloid"),
        ([1.0, 0.0], "tpp"),
        ([-0.3, 1.0], "dram-first"),
    ]:
        assert score(entries)[0] == native[want], (entries, want)
    blend, mix = score([1.0, 1.0])  # half tpp, half dram-first
    assert np.allclose(mix, [0.0, 0.5, 0.5])
    assert blend not in (native["tpp"], native["dram-first"])
    with pytest.raises(ValueError, match="distinct"):
        AgentInterface(ViewConfig(["tpp", "tpp"]))


def test_hard_mixing_follows_one_base_whole() -> None:
    """``mixing: hard`` follows the base with the largest entry above 0 (the first base
    when none is), exactly as that heuristic runs alone, never a blend."""
    sc, names = "kv-store", ["colloid", "tpp", "dram-first"]
    kw = {"tiering_modes": MODES, "base_policy": names, "mixing": "hard"}
    params = core.make_params(sc, split="test", tiering_modes=MODES, pool_size=8)
    spaces_ = agent_spaces(params, names)

    native = {n: _geomeans(rollout(n, sc, 3, seed=5)) for n in names}
    for entries, want, share in [
        ([0.3, 0.8], "dram-first", [0.0, 0.0, 1.0]),
        ([0.9, 0.2], "tpp", [0.0, 1.0, 0.0]),
        ([-0.5, -0.1], "colloid", [1.0, 0.0, 0.0]),
    ]:
        pol = LearnedPolicy(MixModel(*spaces_, entries), kw, "m", "t")
        assert _geomeans(rollout(pol, sc, 3, seed=5, env_kwargs=kw)) == native[want], entries
        assert np.array_equal(pol.agent.mix, np.tile(share, (3, 1)))
    with pytest.raises(ValueError, match="mixing: got 'sharp'"):
        AgentInterface(ViewConfig(names, mixing="sharp"))


def test_residual_bases_gate_the_residual() -> None:
    """With ``residual_bases`` the residual adjusts only the bases listed: a base outside
    the list runs exactly as that heuristic, whatever the residual entries hold; a listed
    one runs with the residual, as it does when every base takes it; a name that is not a
    base is an error naming the setting."""
    sc, names = "kv-store", ["colloid", "tpp", "dram-first"]
    params = core.make_params(sc, split="test", tiering_modes=MODES, pool_size=8)
    obs_space, act_space = agent_spaces(params, names)

    class Pushed(MixModel):  # every residual entry at 0.4, then the mixing entries
        def predict(
            self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True
        ):
            a, state = super().predict(obs, state)
            a[:, : -len(self.entries)] = 0.4
            return a, state

    def score(entries: list[float], residual_bases: list[str] | None) -> list[float]:
        kw = {"tiering_modes": MODES, "base_policy": names, "mixing": "hard"}
        if residual_bases is not None:
            kw["residual_bases"] = residual_bases
        pol = LearnedPolicy(Pushed(obs_space, act_space, entries), kw, "m", "t")
        return _geomeans(rollout(pol, sc, 3, seed=5, env_kwargs=kw))

    native = {n: _geomeans(rollout(n, sc, 3, seed=5)) for n in names}
    only = ["dram-first"]
    assert score([1.0, -1.0], only) == native["tpp"]
    assert score([-1.0, -1.0], only) == native["colloid"]
    pushed = score([-1.0, 1.0], only)
    assert pushed != native["dram-first"]
    assert pushed == score([-1.0, 1.0], None)
    with pytest.raises(ValueError, match="residual_bases: got \\['caption'\\]"):
        AgentInterface(ViewConfig(names, residual_bases=["caption"]))


def test_base_kernel_must_be_a_mode() -> None:
    params = core.make_params("colocation", pool_size=8)  # no tiering modes
    with pytest.raises(ValueError, match="tiering_modes"):
        AgentInterface(ViewConfig("tpp")).bind(params, 2)
    params = core.make_params("colocation", pool_size=8, tiering_modes=["default"])
    with pytest.raises(ValueError, match="none of the tiering modes"):
        AgentInterface(ViewConfig("tpp")).bind(params, 2)
    pol = LearnedPolicy(ZeroModel(*agent_spaces(params, "tpp")), {"base_policy": "tpp"}, "z", "t")
    with pytest.raises(PolicyError, match="tpp"):
        pol.bind(params, 2)


def test_tiering_mode_entry_bins_and_errors() -> None:
    codec = ActionCodec(1, 2, modes=("default", "tpp", "damon"))
    assert codec.size == 4 and codec.space().shape == (4,)
    a = np.zeros((5, 4))
    a[:, -1] = [-1.0, -0.34, -0.33, 0.34, 1.0]
    assert codec.decode_mode(a).tolist() == [0, 0, 1, 2, 2]
    assert codec.decode_mode(
        codec.encode_box(np.zeros((3, 1, 2)), np.zeros(3), [2, 1, 0])
    ).tolist() == [2, 1, 0]
    disc = ActionCodec(1, 2, action_type="discrete", modes=("default", "tpp"))
    assert disc.space().nvec.tolist()[-1] == 2
    with pytest.raises(ValueError, match="tiering mode choices out of range"):
        disc.decode(np.array([[0, 0, 0, 2]]))
    with pytest.raises(ValueError, match="tiering_modes"):
        ActionCodec(1, 2, modes=("nope",))
    with pytest.raises(ValueError, match="tiering_modes"):
        core.make_params("colocation", pool_size=8, tiering_modes=["tpp", "tpp"])


def test_tiering_mode_sets_that_intervals_kernel_only() -> None:
    """TPP mode through the action == the TPP kernel compiled in, step by step."""
    from baselines.policies import TPP_KERNEL

    seeds = np.arange(4)
    p_mode = core.make_params("kv-store", tiering_modes=["default", "tpp"], pool_size=8)
    p_tpp = core.make_params("kv-store", kernel=TPP_KERNEL, pool_size=8)
    s1, _ = core.reset(p_mode, seeds)
    s2, _ = core.reset(p_tpp, seeds)
    a2 = p_tpp.codec.encode_box(np.zeros((4, p_tpp.n_tenants, p_tpp.n_nodes)), np.full(4, 4096.0))
    a1 = p_mode.codec.encode_box(
        np.zeros((4, p_mode.n_tenants, p_mode.n_nodes)), np.full(4, 4096.0), mode=1
    )
    for _ in range(30):
        s1, _, r1, *_, m1 = core.step(p_mode, s1, a1)
        s2, _, r2, *_, m2 = core.step(p_tpp, s2, a2)
        np.testing.assert_array_equal(r1, r2)
    assert (m1.tiering_mode == 1).all() and (m2.tiering_mode == 0).all()
    assert not s1.instance.active_only.any()  # the instance keeps its own configuration


def test_arrivals_are_visible_the_step_before() -> None:
    """colocation's second tenant starts at 20 s: its descriptors appear in the observation
    that decides the interval starting at 20 s (after 20 steps), not earlier, and they are
    its spec (threads, working set, socket), while its measured entries stay 0 until it runs."""
    params = core.make_params("colocation", split="test", pool_size=8)
    idx = {n: i for i, n in enumerate(params.encoder.names(params.node_names))}
    state, obs = core.reset(params, np.arange(2))
    start = state.instance.start_s[:, 0]
    late = int(np.flatnonzero(start > 0)[0])
    k = round(float(start[late] / state.instance.interval_s[0]))
    act = params.codec.encode_box(np.zeros((2, params.n_tenants, params.n_nodes)), np.zeros(2))
    seen = []
    for step in range(k + 1):
        seen.append(obs[0, idx[f"tenant[{late}].upcoming"]])
        if step == k - 1:
            before = obs[0]
        state, obs, *_, m = core.step(params, state, act)
        if step == k - 1:
            assert not m.tenant_active[0, late]
        if step == k:
            assert m.tenant_active[0, late]  # it ran in the interval after that observation
    assert seen[:k] == [0.0] * k and seen[k] == 1.0
    # the observation after step k-1 decides interval k: it shows the arrival
    state2, obs2 = core.reset(params, np.arange(2))
    for _ in range(k):
        state2, obs2, *_ = core.step(params, state2, act)
    row = obs2[0]
    assert row[idx[f"tenant[{late}].upcoming"]] == 1.0
    assert row[idx[f"tenant[{late}].present"]] == 0.0  # not measured yet
    ws = state2.instance.working_set_gib[late, 0, 0] * state2.model.jit[2, late, 0]
    assert row[idx[f"tenant[{late}].working_set_gib"]] == pytest.approx(
        np.log2(1 + ws) / np.log2(2049), rel=1e-6
    )
    th = state2.instance.threads[late, 0, 0]
    assert row[idx[f"tenant[{late}].threads"]] == pytest.approx(np.log2(1 + th) / 8, rel=1e-6)
    assert before[idx[f"tenant[{late}].upcoming"]] == 0.0
    # capacities and the promotion limit in force
    dram = state2.instance.capacity_gib[~state2.instance.is_cxl[:, 0], 0].sum()
    assert row[idx["dram_capacity_gib"]] == pytest.approx(
        np.log2(1 + dram) / np.log2(2049), rel=1e-6
    )
    assert row[idx["promote_limit"]] == 0.0


def test_promotion_limit_in_force_is_observed() -> None:
    params = core.make_params("kv-store", pool_size=8)
    idx = params.encoder.names(params.node_names).index("promote_limit")
    state, _ = core.reset(params, [0])
    act = params.codec.encode_box(
        np.zeros((1, params.n_tenants, params.n_nodes)), np.array([256.0])
    )
    _, obs, *_ = core.step(params, state, act)
    assert obs[0, idx] == pytest.approx(np.log1p(256.0) / np.log1p(65536.0), rel=1e-3)


def test_training_env_zero_residual_runs_the_base() -> None:
    """The SB3 wrapper: zero residuals give the base heuristic's weights and rate in force."""
    kw = {
        "scenario": "colocation",
        "pool_size": 8,
        "tiering_modes": MODES,
        "base_policy": "colloid",
    }
    venv = make_training_vec_env(3, kw)
    venv.seed(5)
    obs = venv.reset()
    inner = venv.venv.venv  # VecMonitor -> AgentVecEnv -> TierGymVecEnv
    params = inner.params
    assert obs.shape == (3, params.encoder.size + params.codec.size)
    ref = make_policy("colloid")
    ref.bind(params, 3)
    ref.observe(None, inner.hardware())
    start = np.ones(3, dtype=bool)
    for _ in range(25):
        want, _ = ref.predict(obs[:, : params.encoder.size], episode_start=start)
        obs, _, done, infos = venv.step(np.zeros((3, params.codec.size), np.float32))
        m = infos[0]["metrics"]
        np.testing.assert_array_equal(m.tiering_mode, TIERING_MODES_INDEX["tpp"])
        wm, w = params.codec.decode(want)
        np.testing.assert_array_equal(m.promote_rate_mbps, wm.promote_mbps)
        np.testing.assert_array_equal(m.interleave_weights, w)
        ref.observe(m, inner.hardware())
        start = done


TIERING_MODES_INDEX = {m: i for i, m in enumerate(MODES)}


def test_one_padded_policy_runs_every_machine_shape() -> None:
    """pad_nodes=5: the same agent spaces on the 2-node and the 5-node machine; the zero
    residual is the base heuristic exactly on both, and padded nodes' weights are ignored."""
    kw = {"tiering_modes": MODES, "base_policy": "colloid", "pad_nodes": 5}
    shapes = set()
    for sc in ("colocation", "mlc-bandwidth", "mixed-2s"):
        params = core.make_params(sc, split="test", tiering_modes=MODES, pool_size=8, max_tenants=4)
        agent = AgentInterface(ViewConfig("colloid", pad_nodes=5))
        obs_space, act_space = agent.spaces(params)
        shapes.add((obs_space.shape, act_space.shape))
        pol = LearnedPolicy(ZeroModel(obs_space, act_space), {**kw, "max_tenants": 4}, "z", "t")
        zero = _geomeans(rollout(pol, sc, 4, seed=1, env_kwargs={**kw, "max_tenants": 4}))
        assert zero == _geomeans(rollout("colloid", sc, 4, seed=1, env_kwargs={"max_tenants": 4}))
    assert len(shapes) == 1
    # the padded view: node mask and descriptors, and padded weights dropped
    params = core.make_params("colocation", tiering_modes=MODES, pool_size=8, max_tenants=4)
    agent = AgentInterface(ViewConfig(None, pad_nodes=5))
    agent.bind(params, 2)
    state, obs = core.reset(params, [0, 1])
    agent.observe(None, core.hardware(state))
    view = agent.obs_to_agent(obs, None)
    assert view.shape == (2, agent.spaces(params)[0].shape[0])
    node = view[:, : 5 * 8].reshape(2, 5, 8)
    assert node[:, :, 3].tolist() == [[1, 1, 0, 0, 0]] * 2  # the mask
    assert node[:, 1, 4].tolist() == [1, 1] and node[:, 0, 4].tolist() == [0, 0]  # is_cxl
    assert (node[:, 2:] == 0).all()
    a = np.random.default_rng(0).uniform(-1, 1, (2, agent.spaces(params)[1].shape[0]))
    b = a.copy().reshape(2, -1)
    w = b[:, : 4 * 5].reshape(2, 4, 5)
    w[:, :, 2:] = -a[:, : 4 * 5].reshape(2, 4, 5)[:, :, 2:]  # other values on padded nodes
    np.testing.assert_array_equal(agent.action_to_env(None, a), agent.action_to_env(None, b))
    assert agent.action_to_env(None, a).shape == (2, params.codec.size)
    with pytest.raises(ValueError, match="more than 1"):
        AgentInterface(ViewConfig(None, pad_nodes=1)).spaces(params)


def test_training_env_over_machine_shapes() -> None:
    """train_families: one batch per family, the same agent spaces, steps run."""
    kw = {
        "scenario": "mixed",
        "pool_size": 8,
        "tiering_modes": MODES,
        "base_policy": "colloid",
        "pad_nodes": 5,
        "train_families": ["mixed-2s", "mixed-4cxl"],
    }
    venv = make_training_vec_env(6, kw)
    venv.seed(1)
    obs = venv.reset()
    assert obs.shape[0] == 6
    ended = np.zeros(6, dtype=bool)
    for _ in range(101):  # past the episodes' end: autoreset and terminal observations
        obs, rew, done, infos = venv.step(np.zeros((6, venv.action_space.shape[0]), np.float32))
        ended |= done
        for i in np.flatnonzero(done):
            assert infos[i]["terminal_observation"].shape == obs.shape[1:]
    assert ended.all() and np.isfinite(rew).all() and obs.shape[0] == 6
    nodes = {infos[i]["metrics"].node_bandwidth_gbps.shape[1] for i in range(6)}
    assert nodes == {2, 3, 5}


def test_a_run_from_before_the_descriptors_is_refused_by_its_format(tmp_path: Any) -> None:
    """A run that records no observation layout (before the tenant descriptors) is not read:
    the error names the file and the run's format."""
    import json

    from stable_baselines3 import PPO

    from agents import persist
    from agents.evaluation import load_policy
    from envs.sb3 import make_vec_env

    run = tmp_path / "old"
    run.mkdir()
    env = {"scenario": "colocation", "split": "train"}
    model = PPO("MlpPolicy", make_vec_env(2, **env, observation="basic", pool_size=8),
                n_steps=8, batch_size=16, device="cpu")  # fmt: skip
    meta = {"algo": "ppo", "policy": "MlpPolicy", "hyperparams": {"n_steps": 8, "batch_size": 16},
            "normalize_reward": False, "env": env, "seed": 0}  # fmt: skip
    persist.write_model(run / "model.zip", model, meta, 0)
    (run / "tiergym.json").write_text(json.dumps({"algo": "ppo", "env": env, "seed": 0}))
    with pytest.raises(PolicyError, match=r"tiergym\.json.*no 'observation'.*run format 0"):
        load_policy(str(run))


def test_default_padding_covers_every_shipped_scenario() -> None:
    """The default recipe's pad_nodes (agents/recipes/imitation.yml) is at least every shipped
    machine's node count, so the one default policy runs on each of them; on the largest
    (6 nodes) the zero action is still the (first) base heuristic exactly."""
    from agents.config.load import load_recipe
    from envs.scenario import load_scenario, scenario_names

    env = load_recipe("imitation")[0].env.given()
    pad = env["pad_nodes"]
    sizes = {n: len(load_scenario(n).hardware.node_names) for n in scenario_names()}
    assert max(sizes.values()) == 6  # cxl-spill: 2 sockets x 2 SNC nodes + 2 expanders
    assert pad >= max(sizes.values()), f"pad_nodes {pad} < {sizes}"
    shapes = set()
    for sc in ("colocation", "cxl-spill"):
        params = core.make_params(sc, tiering_modes=env["tiering_modes"], max_tenants=4)
        shapes.add(tuple(s.shape for s in agent_spaces(params, env["base_policy"], pad)))
    assert len(shapes) == 1
    kw = {"tiering_modes": env["tiering_modes"], "base_policy": env["base_policy"]}
    kw |= {"pad_nodes": pad, "max_tenants": 4}
    params = core.make_params("cxl-spill", tiering_modes=env["tiering_modes"], max_tenants=4)
    obs_space, act_space = agent_spaces(params, env["base_policy"], pad)
    pol = LearnedPolicy(ZeroModel(obs_space, act_space), kw, "z", "t")
    zero = _geomeans(rollout(pol, "cxl-spill", 2, seed=1, env_kwargs=kw))
    first = env["base_policy"] if isinstance(env["base_policy"], str) else env["base_policy"][0]
    base = rollout(first, "cxl-spill", 2, seed=1, env_kwargs={"max_tenants": 4})
    assert zero == _geomeans(base)


def test_share_codec_moves_each_tenants_dram_share() -> None:
    """``residual_codec: share``: one entry per tenant moves the listed base's DRAM share
    (``x = x_base + residual_scale * 1.25 / 2 * r``, above 1 local-first), split over each
    tier by firmware bandwidth; a zero entry keeps the base's weights exactly, and a base
    outside ``residual_bases`` runs as its heuristic whatever the entries hold."""
    names = ["colloid", "weighted-interleave", "dram-first"]
    params = core.make_params("mixed", split="test", tiering_modes=MODES, pool_size=8)
    iface = AgentInterface(
        ViewConfig(names, 2.0, None, "hard", residual_bases=["dram-first"], residual_codec="share")
    )
    B, T = 4, params.n_tenants
    iface.bind(params, B)
    state, _ = core.reset(params, np.arange(B, dtype=np.uint64))
    obs = core.observe(params, state, None)
    hw = core.hardware(state)
    iface.observe(None, hw)
    base = iface.decide(obs, np.ones(B, dtype=bool))
    _, act_space = iface.spaces(params)
    assert act_space.shape == (T + 2 + 2,)  # shares, rate, mode, two mixing entries
    c = params.codec

    def env_action(shares: list[float], corner: int) -> np.ndarray:
        a = np.zeros((B, act_space.shape[0]), np.float32)
        a[:, :T] = shares
        a[:, -2:] = [1.0 if corner == j else -1.0 for j in (1, 2)]
        return iface.action_to_env(base, a)

    def same(a: np.ndarray, b: np.ndarray) -> bool:  # the same decision decoded
        (x, wx), (y, wy) = c.decode(a), c.decode(b)
        return bool(
            np.array_equal(wx, wy)
            and np.array_equal(x.promote_mbps, y.promote_mbps)
            and np.array_equal(c.decode_mode(a), c.decode_mode(b))
        )

    for corner in range(3):  # zero entries: each base exactly
        assert same(env_action([0.0] * T, corner), base[:, corner])
    # a non-listed base ignores the entries
    assert same(env_action([-0.6] * T, 1), base[:, 1])
    # dram-first (local-first: x_base = 1.25) with entries -0.6 (x = 0.5), -0.9 (x = 0.125),
    # -0.1 (x = 1.125: still local-first) and 0 (its own weights)
    got = env_action([-0.6, -0.9, -0.1, 0.0] + [0.0] * (T - 4), 2)
    w = c.box_weights(got[:, : T * c.n_nodes].reshape(B, T, c.n_nodes))
    share = dram_share(w, hw.is_cxl)
    assert np.allclose(share[:, 0], 0.5, atol=0.01) and np.allclose(share[:, 1], 0.125, atol=0.01)
    assert (share[:, 2:] == SHARE_TOP).all()  # local-first: no weights
    rest = np.s_[:, T * c.n_nodes :]
    assert np.allclose(got[rest], base[:, 2][rest], atol=1e-6)  # rate and mode: dram-first's
    # each tier split by firmware bandwidth
    cxl = hw.is_cxl
    bw = np.where(cxl, hw.firmware_gbps, 0.0)
    want = 0.5 * bw / bw.sum(axis=1, keepdims=True)
    assert np.allclose(w[:, 0] / w[:, 0].sum(axis=1, keepdims=True) * cxl, want, atol=0.01)
    with pytest.raises(ValueError, match="residual_codec: got 'shares'"):
        AgentInterface(ViewConfig(names, residual_codec="shares"))
    with pytest.raises(ValueError, match="residual_codec: 'share' needs base_policy"):
        AgentInterface(ViewConfig(None, residual_codec="share"))


# ---------------------------------------------------------------------- the view's pieces
DEFAULT_VIEW = {
    "base_policy": ["colloid", "tpp", "weighted-interleave", "dram-first", "memcg-fair", "caption"],
    "mixing": "hard",
    "residual_bases": ["dram-first"],
    "residual_scale": 2.0,
    "residual_codec": "share",
    "pad_nodes": 6,
    "observation": "cgroup",
    "tiering_modes": MODES,
}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"residual_scale": 0.0}, "residual_scale: got 0.0, expected a number > 0"),
        ({"residual_scale": float("nan")}, "residual_scale: got nan"),
        ({"base_policy": "tpp", "mixing": "sharp"}, "mixing: got 'sharp'"),
        ({"base_policy": "tpp", "residual_codec": "shares"}, "residual_codec: got 'shares'"),
        ({"residual_codec": "share"}, "residual_codec: 'share' needs base_policy"),
        ({"pad_nodes": 0}, "pad_nodes: got 0, expected at least 1"),
        ({"base_policy": []}, "base_policy: got \\[\\], expected distinct"),
        ({"base_policy": ["tpp", "tpp"]}, "base_policy: got \\['tpp', 'tpp'\\]"),
        ({"base_policy": ["tpp", "colloid"], "residual_bases": []}, "residual_bases: got \\[\\]"),
        ({"base_policy": ["tpp"], "residual_bases": ["tpp", "tpp"]}, "residual_bases: got"),
        ({"residual_bases": ["tpp"]}, "residual_bases: got \\['tpp'\\], expected .* \\[\\]"),
    ],
)
def test_view_spec_rejects_each_bad_setting_by_name(settings: dict[str, Any], message: str) -> None:
    """The spec checks the view's settings when it is built, and the error names the setting
    (the run's config check prefixes it with ``env.``); ``make_interface`` raises the same."""
    from agents.view import make_interface

    with pytest.raises(ValueError, match=message):
        ViewConfig(**settings)
    with pytest.raises(ValueError, match=message):
        make_interface(settings)


def test_view_spec_from_env_settings() -> None:
    """Unset or null settings are the defaults; lists are kept as tuples; the spec is frozen."""
    import dataclasses

    from agents.view import DEFAULT_RESIDUAL_SCALE, MIXINGS, RESIDUAL_CODECS

    blank = ViewConfig.from_env({"scenario": "mixed", "mixing": None, "residual_scale": None})
    assert blank == ViewConfig()
    assert (blank.residual_scale, blank.mixing) == (DEFAULT_RESIDUAL_SCALE, MIXINGS[0])
    assert blank.residual_codec == RESIDUAL_CODECS[0] and not blank.active
    spec = ViewConfig.from_env(DEFAULT_VIEW)
    assert spec.base_policy == tuple(DEFAULT_VIEW["base_policy"])
    assert spec.names == DEFAULT_VIEW["base_policy"]
    assert spec.residual_mask.tolist() == [False, False, False, True, False, False]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.pad_nodes = 4  # type: ignore[misc]
    iface = AgentInterface(spec)
    assert (iface.names, iface.scale, iface.pad_nodes) == (spec.names, 2.0, 6)
    assert (iface.codec, iface.mixing, iface.share_span) == ("share", "hard", 1.25)


@pytest.mark.parametrize("scenario", ["colocation", "cxl-spill"])
def test_padded_layout_parts_tile_the_view(scenario: str) -> None:
    """The padded layout's named parts tile the agent's observation, a node slot, a tenant
    slot and a box action exactly, in both layouts (the environment's and the padded), and
    name the entries the encoder names: each of the environment's entries lands once, where
    its part says, padded entries are 0."""
    from agents.view import PaddedLayout
    from agents.view.padding import NODE_DESCRIPTORS, pad_observation

    names = DEFAULT_VIEW["base_policy"]
    params = core.make_params(scenario, tiering_modes=MODES, observation="cgroup", max_tenants=4)
    lay = PaddedLayout.of(params, 6, len(names))
    for blocks, size in ((lay.env_obs, params.encoder.size), (lay.obs, None)):
        assert blocks.nodes.start == 0 and blocks.nodes.stop == blocks.tenants.start
        assert blocks.tenants.stop == blocks.globals.start
        assert size is None or blocks.size == size
    assert lay.obs.size == lay.base_actions.start and lay.base_actions.stop == lay.size
    assert lay.size == agent_spaces(params, names, 6)[0].shape[0]
    assert lay.node_entries.stop == lay.node_descriptors.start
    assert lay.node_descriptors.stop == lay.obs.node_width == 3 + len(NODE_DESCRIPTORS)
    for slot, n in ((lay.env_slot, params.n_nodes), (lay.slot, 6)):
        assert slot.entries.start == 0 and slot.entries.stop == slot.weights.start
        assert slot.weights.stop - slot.weights.start == n
        assert slot.weights.stop == slot.descriptors.start and slot.descriptors.stop == slot.size
    for act, n in ((lay.env_action, params.n_nodes), (lay.action, 6)):
        assert act.weights.start == 0 and act.weights.stop == act.rest.start == act.rows * n
        assert act.rest.stop == act.size
    assert lay.env_action.size == params.codec.size
    assert lay.base_actions.stop - lay.base_actions.start == len(names) * lay.action.size

    enc = params.encoder
    entry = {k: i for i, k in enumerate(enc.names(params.node_names))}
    B = 2
    state, _ = core.reset(params, np.arange(B))
    obs = np.tile(np.arange(1, enc.size + 1, dtype=np.float32), (B, 1))  # each entry its own
    view = pad_observation(lay, obs, core.hardware(state))
    assert view.shape == (B, lay.obs.size)
    nodes = view[:, lay.obs.nodes].reshape(B, 6, lay.obs.node_width)
    slots = view[:, lay.obs.tenants].reshape(B, enc.T, lay.slot.size)
    N = params.n_nodes
    for n, node in enumerate(params.node_names):
        for j, k in enumerate(("utilization", "latency_over_idle", "capacity_used")):
            assert (nodes[:, n, lay.node_entries.start + j] == entry[f"node[{node}].{k}"] + 1).all()
    assert (nodes[:, N:] == 0).all()
    for t in range(enc.T):
        w = slots[:, t, lay.slot.weights]
        for n, node in enumerate(params.node_names):
            assert (w[:, n] == entry[f"tenant[{t}].weight[{node}]"] + 1).all()
        assert (w[:, N:] == 0).all()
        for j, k in enumerate(enc.desc_names):
            got = slots[:, t, lay.slot.descriptors.start + j]
            assert (got == entry[f"tenant[{t}].{k}"] + 1).all()
    assert (view[:, lay.obs.globals] == obs[:, lay.env_obs.globals]).all()
    parts = [nodes[:, :, lay.node_entries], slots, view[:, lay.obs.globals]]
    values = np.concatenate([p.ravel() for p in parts])
    assert sorted(values[values > 0].tolist()) == sorted(obs.ravel().tolist())


@pytest.mark.parametrize("weights", ["per-tenant", "global"])
def test_pad_then_unpad_is_the_identity(weights: str) -> None:
    """A box action padded to ``pad_nodes`` (padded weights ``fill``) and unpadded again is
    the action it was, bit for bit; padding keeps each machine node's weight in its row."""
    from agents.view import PaddedLayout
    from agents.view.padding import pad_action, unpad_action

    params = core.make_params("mixed-2s", tiering_modes=MODES, weights=weights, max_tenants=4)
    lay = PaddedLayout.of(params, 5)
    a = np.random.default_rng(2).uniform(-1, 1, (3, params.codec.size)).astype(np.float32)
    for fill in (-1.0, 1.0):
        padded = pad_action(lay, a, fill)
        assert padded.shape == (3, lay.action.size)
        rows = padded[:, lay.action.weights].reshape(3, lay.weight_rows, 5)
        env_rows = a[:, lay.env_action.weights].reshape(3, lay.weight_rows, params.n_nodes)
        assert np.array_equal(rows[:, :, : params.n_nodes], env_rows)
        assert (rows[:, :, params.n_nodes :] == fill).all()
        assert np.array_equal(padded[:, lay.action.rest], a[:, lay.env_action.rest])
        assert np.array_equal(unpad_action(lay, padded), a)
    with pytest.raises(ValueError, match="action: got shape"):
        pad_action(lay, a[:, :-1], -1.0)


def test_agent_layout_is_the_saved_models() -> None:
    """``policy_kwargs.layout`` of the default recipe, as its saved model records it."""
    from agents.view import agent_layout, environment_config, make_interface

    env = {**DEFAULT_VIEW, "scenario": "mixed"}
    params = core.make_params(environment_config(env, pool_size=8))
    assert agent_layout(params, make_interface(env)) == {
        "nodes": 6,
        "node_features": 8,
        "node_mask": 3,
        "tenants": 4,
        "tenant_features": 22,
        "tenant_present": 0,
        "tenant_upcoming": 12,
        "globals": 7,
        "bases": 6,
        "base_action": 26,
        "shares": 4,
        "critic_tenant_features": 0,
    }
    with pytest.raises(ValueError, match=r"TenantPolicy: needs env\.pad_nodes"):
        agent_layout(params, make_interface({**env, "pad_nodes": None}))


def test_mixing_shares_and_gate() -> None:
    """Soft mixing: the clipped entries scaled to sum to at most 1 are the extra bases'
    shares, the first base gets the rest; the gate is the listed bases' share. Hard: one
    base whole (the largest entry above 0, the first on a tie; the first base when none)."""
    from agents.view.mixing import mix_bases

    base = np.stack([np.full((2, 3), -1.0), np.zeros((2, 3)), np.ones((2, 3))], axis=1)
    base = base.astype(np.float32)
    action = np.array([[0.2, 0.2, 0.2, 0.5, 0.75], [0.0, 0.0, 0.0, -1.0, 0.25]], np.float32)
    listed = np.array([False, True, False])
    got = mix_bases(base, action, "soft", listed)
    assert got.share is not None and np.allclose(got.share, [[0.0, 0.4, 0.6], [0.75, 0.0, 0.25]])
    assert got.base is not None and np.allclose(got.base[:, 0], [0.6, -0.5])
    assert np.allclose(got.gate, [[0.4], [0.0]])
    assert np.array_equal(got.residual, action[:, :3])
    hard = mix_bases(base, np.array([[0, 0, 0, 0.5, 0.5], [0, 0, 0, -0.2, 0.0]]), "hard", listed)
    assert hard.share is not None and hard.share.tolist() == [[0, 1, 0], [1, 0, 0]]
    assert mix_bases(None, action, "soft", listed).share is None


def test_zero_residual_on_the_host_view_with_global_weights_is_the_base() -> None:
    """What ``deploy.py`` runs as a residual (issue #51): the host view, one global weight
    vector and the host's tiering modes. The agent observes the host view then the base's
    action; the zero residual over each host heuristic of the default kernel scores exactly
    what the heuristic scores with global weights, and a residual moves the score."""
    from envs.host import host_view_size

    host = {"observation": "host", "weights": "global", "tiering_modes": ["default", "no-demotion"]}
    params = core.make_params("colocation", split="test", pool_size=8, **host)
    natives = {}
    for name in ["bw-aware-interleave", "weighted-interleave", "numa-tiering", "dram-first"]:
        kw = {**host, "base_policy": name}
        obs_space, act_space = agent_spaces(params, name)
        T, N = params.encoder.T, params.n_nodes
        assert obs_space.shape == (host_view_size(T, N) + params.codec.size,)
        assert act_space.shape == (N + 2,)  # one weight row, the rate, the mode
        pol = LearnedPolicy(ZeroModel(obs_space, act_space), kw, "zero", "test")
        residual = _geomeans(rollout(pol, "colocation", 4, seed=3, env_kwargs=kw))
        native = _geomeans(rollout(name, "colocation", 4, seed=3, env_kwargs={"weights": "global"}))
        assert residual == native, name
        natives[name] = native

    class Push(ZeroModel):  # more CXL weight for every tenant (the one global row)
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            a = np.zeros((obs.shape[0], self.action_space.shape[0]), np.float32)
            a[:, 1] = 1.0
            return a, state

    kw = {**host, "base_policy": "bw-aware-interleave"}
    pushed = LearnedPolicy(Push(*agent_spaces(params, "bw-aware-interleave")), kw, "p", "t")
    moved = np.mean(_geomeans(rollout(pushed, "colocation", 4, seed=3, env_kwargs=kw)))
    assert abs(moved - np.mean(natives["bw-aware-interleave"])) > 0.005


def test_instances_split_between_the_scenario_and_the_families() -> None:
    """Evenly by default (the first batches one more where it does not divide, as before
    scenario_share existed); with a share, the scenario's rounded and at least one, the rest
    evenly; every batch at least one instance, else a ValueError naming the counts."""
    assert split_instances(256, 9) == [26] * 6 + [25] * 4
    assert split_instances(256, 9, 0.5) == [128] + [15] * 2 + [14] * 7
    assert split_instances(4, 1, 0.75) == [3, 1] and split_instances(4, 3, 0.01) == [1, 1, 1, 1]
    for n, k, share in ((300, 9, None), (256, 9, 0.3), (17, 4, 0.5)):
        got = split_instances(n, k, share)
        assert sum(got) == n and len(got) == k + 1 and max(got[1:]) - min(got[1:]) <= 1
    with pytest.raises(ValueError, match=r"3 instances cannot give the scenario and 3 families"):
        split_instances(3, 3)
    with pytest.raises(ValueError, match=r"10 instances cannot give the scenario and 9 families"):
        split_instances(10, 9, 0.5)
