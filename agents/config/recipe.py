"""A recipe: every setting that shapes how a policy is trained (``agents/recipes/NAME.yml``)."""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from agents.config.fields import (
    ACTIVATIONS,
    ALGOS,
    PROJECT_POLICIES,
    Int,
    Layer,
    Name,
    NameList,
    Num,
    PlainMap,
    _Strict,
    env_field,
)
from agents.config.imitation import ImitationSettings
from agents.config.view import MIXINGS, RESIDUAL_CODECS, ViewConfig, base_names
from baselines import catalogue
from envs.config import EnvConfig, field_names
from envs.generator import expand_family_names

__all__ = [
    "EnvSettings",
    "Hyperparams",
    "PolicyKwargs",
    "RLSettings",
    "Recipe",
    "algo_class",
    "policy_names",
]

# ============================================================================ recipe parts


class PolicyKwargs(_Strict):
    """``policy_kwargs`` of the policy class; which keys a policy takes is read from its
    constructor's signature (:meth:`Recipe._rules`). Unset keys keep the class's defaults."""

    net_arch: list[Layer] | dict[Literal["pi", "vf", "qf"], list[Layer]] | None = Field(
        None, description="layer sizes, or a mapping of pi/vf/qf to layer sizes"
    )
    activation_fn: Literal[tuple(ACTIVATIONS)] | None = None
    ortho_init: bool | None = None
    log_std_init: Num(ge=-20, le=20) | None = None
    full_std: bool | None = None
    use_expln: bool | None = None
    squash_output: bool | None = None
    share_features_extractor: bool | None = None
    normalize_images: bool | None = None
    clip_mean: Num(gt=0) | None = None
    n_critics: Int(1, 64) | None = None
    lstm_hidden_size: Int(1, 1 << 16) | None = None
    n_lstm_layers: Int(1, 64) | None = None
    shared_lstm: bool | None = None
    enable_critic_lstm: bool | None = None
    optimizer_kwargs: PlainMap | None = None
    features_extractor_kwargs: PlainMap | None = None
    lstm_kwargs: PlainMap | None = None
    layout: dict[str, Int(0)] | None = Field(
        None, description="TenantPolicy's layout of the agent's view (filled in by the trainer)"
    )


def _train_freq(v: Any) -> Any:
    if isinstance(v, list | tuple) and len(v) == 2:
        return [v[0], v[1]]
    return v


class Hyperparams(_Strict):
    """Constructor arguments of the algorithm (which ones it takes: its signature).

    Unset arguments keep stable-baselines3's defaults."""

    learning_rate: Num(gt=0) | None = None
    n_steps: Int(1, 1 << 20) | None = None
    batch_size: Int(1, 1 << 24) | None = None
    n_epochs: Int(1, 10_000) | None = None
    gamma: Num(gt=0, le=1) | None = None
    gae_lambda: Num(ge=0, le=1) | None = None
    clip_range: Num(gt=0) | None = None
    clip_range_vf: Num(gt=0) | None = None
    normalize_advantage: bool | None = None
    ent_coef: (
        Num(ge=0) | Annotated[str, Field(pattern=r"^auto(_\d*\.?\d+([eE][+-]?\d+)?)?$")] | None
    ) = None
    vf_coef: Num(ge=0) | None = None
    max_grad_norm: Num(gt=0) | None = None
    use_sde: bool | None = None
    sde_sample_freq: Int(-1) | None = None
    target_kl: Num(gt=0) | None = None
    stats_window_size: Int(1, 1 << 20) | None = None
    rms_prop_eps: Num(gt=0) | None = None
    use_rms_prop: bool | None = None
    buffer_size: Int(1, 1 << 30) | None = None
    learning_starts: Int(0) | None = None
    tau: Num(gt=0, le=1) | None = None
    train_freq: (
        Int(1)
        | Annotated[tuple[Int(1), Literal["step", "episode"]], BeforeValidator(_train_freq)]
        | None
    ) = None
    gradient_steps: Int(-1, 1 << 20) | None = None
    optimize_memory_usage: Literal[False] | None = Field(
        None,
        description="must be false: stable-baselines3 does not combine it with the time-limit "
        "handling this environment needs",
    )
    target_update_interval: Int(1) | None = None
    target_entropy: Literal["auto"] | Num() | None = None
    use_sde_at_warmup: bool | None = None
    policy_delay: Int(1) | None = None
    target_policy_noise: Num(ge=0) | None = None
    target_noise_clip: Num(ge=0) | None = None

    @field_validator("ent_coef")
    @classmethod
    def _auto_positive(cls, v: Any) -> Any:
        if isinstance(v, str) and v != "auto" and not float(v[5:]) > 0:
            raise ValueError("'auto_<initial value>' needs an initial value > 0")
        return v


#: scenario family names; a group name (generator, unseen) stands for its families
FamilyNames = Annotated[NameList, AfterValidator(expand_family_names)]


class EnvSettings(_Strict):
    """The environment and the agent's view of it (:mod:`agents.view`); unset keys keep
    the environment's defaults. The environment's values are checked by
    :class:`envs.config.EnvConfig`, which declares them; the view's by :class:`ViewConfig`."""

    max_tenants: Int() | None = env_field("max_tenants")
    weights: Name | None = env_field(
        "weights", "; the task's unless --weights is given (the host view needs global)"
    )
    max_promote_mbps: Num() | None = env_field("max_promote_mbps")
    kernel: PlainMap | None = env_field("kernel")
    jitter: Num() | None = env_field("jitter")
    pool_size: Int() | None = env_field("pool_size")
    tiering_modes: NameList | None = env_field("tiering_modes")
    observation: Name = env_field("observation", given=True)
    reward_baseline: Name | None = env_field(
        "reward_baseline",
        "; training only, evaluation scores each policy alone",
    )
    generator_chances: dict[str, Num()] | None = env_field(
        "generator_chances", "; training only, evaluation draws envs.generator.CHANCES"
    )
    precision: Name | None = env_field("precision")
    base_policy: Name | NameList | None = Field(
        None, description="a heuristic (residual actions over it) or several (the agent mixes them)"
    )
    residual_scale: Num(gt=0, le=2) | None = None
    mixing: Literal[MIXINGS] | None = None
    residual_bases: NameList | None = None
    residual_codec: Literal[RESIDUAL_CODECS] | None = None
    pad_nodes: Int(1, 64) | None = None
    privileged_critic: bool | None = Field(
        None,
        description="the critic also reads what the episode still holds (coming tenants); "
        "the actor never does (TenantPolicy)",
    )
    train_families: FamilyNames | None = Field(
        None,
        description="more scenario families trained at once (one batch each); a group name "
        "(generator, unseen) stands for its families",
    )

    @model_validator(mode="after")
    def _environment(self) -> EnvSettings:
        try:  # EnvConfig's checks: a ValueError naming the setting
            self.environment()
        except ValueError as exc:
            raise ValueError(f"env.{exc}") from None
        return self

    def environment(self, **task: Any) -> EnvConfig:
        """The environment's settings of the recipe (and ``task``'s), typed."""
        own = {n: getattr(self, n) for n in field_names() if n in type(self).model_fields}
        return EnvConfig.of(**task, **{k: v for k, v in own.items() if v is not None})

    @field_validator("base_policy")
    @classmethod
    def _known_bases(cls, v: Any) -> Any:
        if v is None:
            return v

        known = catalogue.names(reward_baseline=True)
        names = base_names(v)  # a ValueError for a repeated name
        bad = [n for n in names if n not in known and not n.startswith("static:")]
        if bad:
            raise ValueError(f"unknown heuristic {bad[0]!r}; expected names of {known}")
        return v


# ============================================================================ the recipe


def algo_class(name: str) -> Any:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import A2C, PPO, SAC, TD3

    return {"ppo": PPO, "a2c": A2C, "sac": SAC, "td3": TD3, "recurrent-ppo": RecurrentPPO}[name]


def policy_names(algo: str) -> list[str]:
    """The algorithm's policies for flat observations (its ``Mlp*`` aliases, and the
    project's of :data:`PROJECT_POLICIES` that serve it)."""
    own = [n for n, p in PROJECT_POLICIES.items() if algo in p.algos]
    return sorted([n for n in algo_class(algo).policy_aliases if n.startswith("Mlp")] + own)


def _signature(cls: Any) -> set[str]:
    return set(inspect.signature(cls.__init__).parameters)


def constructor_rules(
    algo: str, policy: str, hp: Hyperparams, pk: PolicyKwargs, prefix: str = ""
) -> None:
    """The keys ``algo``'s constructor and ``policy``'s take (read from their signatures; a
    project policy's as :data:`PROJECT_POLICIES` declares them)."""
    taken = _signature(algo_class(algo))
    for key in hp.given():
        if key not in taken:
            raise ValueError(
                f"{prefix}hyperparams.{key}: {algo} takes no {key!r}; expected one of "
                f"{sorted(k for k in Hyperparams.model_fields if k in taken)}"
            )
    if policy not in policy_names(algo):
        raise ValueError(f"policy: expected one of {policy_names(algo)} for {algo}")
    if policy in PROJECT_POLICIES:
        ptaken = set(PROJECT_POLICIES[policy].keywords) - {"use_sde"}
    else:
        ptaken = _signature(algo_class(algo).policy_aliases[policy]) - {"use_sde"}
    for key in pk.given():
        if key not in ptaken:
            raise ValueError(
                f"policy_kwargs.{key}: {algo}'s {policy} takes no {key!r}; "
                f"expected one of {sorted(k for k in PolicyKwargs.model_fields if k in ptaken)}"
            )


def sb3_kwargs(hp: Hyperparams, pk: PolicyKwargs) -> dict[str, Any]:
    """Constructor arguments for stable-baselines3 from checked values (unset ones left out)."""
    import torch.nn as nn

    out = hp.given()
    if isinstance(out.get("train_freq"), list):
        out["train_freq"] = tuple(out["train_freq"])
    kwargs = pk.given()
    if "activation_fn" in kwargs:
        kwargs["activation_fn"] = getattr(nn, ACTIVATIONS[kwargs["activation_fn"]])
    if kwargs:
        out["policy_kwargs"] = kwargs
    return out


class FineTuneSettings(_Strict):
    """Guards of the RL phase around the policy it starts from (:mod:`agents.finetune`)."""

    critic_warmup: Int(0, 1 << 20) = Field(
        0, description="rollouts whose update trains the value function alone (actor frozen)"
    )
    anchor_coef: Num(ge=0, le=1e6) = Field(
        0.0,
        description="weight of the squared distance of the action mean to the policy RL "
        "started from, against the algorithm's loss, at the first update (0: no anchor)",
    )
    anchor_decay: Num(gt=0, le=1) = Field(1.0, description="the anchor's factor per update")
    anchor_steps: Int(0, 1 << 12) = Field(
        0,
        description="0: the anchor is a term of the algorithm's loss at every gradient step; "
        "more: instead that many steps of a separate Adam on it after each update",
    )
    anchor_learning_rate: Num(gt=0, le=1) = Field(
        1e-4, description="the separate anchor steps' Adam rate (anchor_steps > 0)"
    )
    anchor_batch: Int(1, 1 << 20) = Field(
        4096, description="observations the anchor is taken on at each of its gradient steps"
    )
    anchor_states: Literal["rollout", "imitation"] = Field(
        "rollout",
        description="the observations the anchor is taken on: each rollout's, or the imitation "
        "phase's labelled states of the families the RL phase does not draw (rl.train_families)",
    )
    log_std: Num(ge=-20, le=2) | None = Field(
        None, description="the Gaussian policy's log-std, fixed (not trained); null: trained"
    )


class RLSettings(_Strict):
    """The reinforcement-learning phase of a recipe."""

    total_timesteps: Int(1) = Field(
        description="environment steps of RL, rounded up to whole rollouts; --timesteps"
    )
    n_envs: Int(1, 1 << 16) = Field(
        description="parallel instances of the native vector env; --num-envs"
    )
    normalize_reward: bool = Field(
        description="VecNormalize on rewards (observations are in [0, 1])"
    )
    hyperparams: Hyperparams = Field(description="the algorithm's constructor arguments")
    finetune: FineTuneSettings | None = Field(
        None, description="critic warm-up, an anchor to the starting policy, a fixed log-std"
    )
    train_families: FamilyNames | None = Field(
        None,
        description="the families RL's environment draws beside the scenario, a part of "
        "env.train_families (null: all of them; []: the scenario alone)",
    )
    scenario_share: Num(gt=0.0, lt=1.0) | None = Field(
        None,
        description="the share of RL's instances on the scenario, the rest split evenly over "
        "the families it draws (null: the scenario and each family alike)",
    )


class Recipe(_Strict):
    """A way of training, whole: ``agents/recipes/NAME.yml`` (see docs/training.md)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)]
    summary: Name = Field(description="one sentence: what the recipe trains")
    algo: Literal[ALGOS] = Field(
        description="the stable-baselines3 algorithm whose policy is trained and saved"
    )
    policy: Name = Field(
        description="the policy class: one of the algorithm's Mlp* or TenantPolicy"
    )
    policy_kwargs: PolicyKwargs = PolicyKwargs()
    env: EnvSettings
    imitation: ImitationSettings | None = Field(
        None, description="the imitation phase (agents.imitation), before RL if both; null: none"
    )
    rl: RLSettings | None = Field(
        None, description="reinforcement learning with the algorithm (after imitation); null: none"
    )

    @model_validator(mode="after")
    def _rules(self) -> Recipe:
        """The rules between options (each raises a ValueError naming the field)."""
        constructor_rules(self.algo, self.policy, self.hyperparams, self.policy_kwargs, "rl.")
        self._algorithm_rules()
        try:  # the agent's view validates its own combination of settings
            ViewConfig.from_env(self.env.given())
        except ValueError as exc:
            raise ValueError(f"env.{exc}") from None
        if self.imitation is not None:
            self._imitation_rules()
        elif self.rl is None:
            raise ValueError("rl: a recipe without an imitation phase needs an rl: section")
        return self

    @property
    def hyperparams(self) -> Hyperparams:
        """The algorithm's constructor arguments (none without an RL phase: its defaults)."""
        return self.rl.hyperparams if self.rl is not None else Hyperparams()

    @property
    def total_timesteps(self) -> int:
        return self.rl.total_timesteps if self.rl is not None else 0

    @property
    def n_envs(self) -> int:
        return self.rl.n_envs if self.rl is not None else 1

    def _algorithm_rules(self) -> None:
        hp = self.hyperparams
        if isinstance(hp.ent_coef, str) and self.algo != "sac":
            raise ValueError(
                f"rl.hyperparams.ent_coef: 'auto' is SAC's; {self.algo} takes a number"
            )
        if self.algo in ("ppo", "recurrent-ppo"):
            n_steps = hp.n_steps or (2048 if self.algo == "ppo" else 128)
            if n_steps * self.n_envs < 2:
                raise ValueError(
                    f"rl.hyperparams.n_steps: {n_steps} with n_envs={self.n_envs} gives rollouts "
                    f"of {n_steps * self.n_envs} step; expected n_steps x n_envs >= 2"
                )
            if hp.normalize_advantage is not False and (hp.batch_size or 64) < 2:
                raise ValueError(
                    f"rl.hyperparams.batch_size: {hp.batch_size}: expected an integer >= 2 "
                    "(advantages are normalised per batch; or set normalize_advantage: false)"
                )
        if self.rl is not None and self.rl.finetune is not None and self.algo not in ("ppo", "a2c"):
            raise ValueError(
                f"rl.finetune: the guards act on an on-policy Gaussian policy (ppo, a2c), "
                f"not {self.algo}'s"
            )
        rl_families = self.rl.train_families if self.rl is not None else None
        ft = self.rl.finetune if self.rl is not None else None
        if ft is not None and ft.anchor_states == "imitation":
            others = [f for f in self.env.train_families or [] if f not in (rl_families or [])]
            if self.imitation is None or rl_families is None or not others:
                raise ValueError(
                    "rl.finetune.anchor_states: 'imitation' needs an imitation phase, "
                    "rl.train_families and a family of env.train_families that RL does not "
                    "draw (the anchor is taken on its labelled states)"
                )
        share = self.rl.scenario_share if self.rl is not None else None
        drawn = rl_families if rl_families is not None else (self.env.train_families or [])
        if share is not None and not drawn:
            raise ValueError(
                f"rl.scenario_share: {share}: RL draws the scenario alone (no family in "
                "rl.train_families or env.train_families); leave it null or name families"
            )
        if rl_families is not None:
            outside = [f for f in rl_families if f not in (self.env.train_families or [])]
            if outside:
                raise ValueError(
                    f"rl.train_families: {outside[0]!r} is not in env.train_families "
                    f"({self.env.train_families}); RL draws a part of them beside the scenario, "
                    "which it always draws ([]: the scenario alone)"
                )
        pk = self.policy_kwargs
        if self.algo == "recurrent-ppo" and pk.shared_lstm and pk.enable_critic_lstm is not False:
            raise ValueError("policy_kwargs.shared_lstm: true needs enable_critic_lstm: false")
        if self.policy == "TenantPolicy" and self.env.pad_nodes is None:
            raise ValueError("policy: TenantPolicy needs env.pad_nodes (the padded view it reads)")
        if self.env.privileged_critic and self.policy != "TenantPolicy":
            raise ValueError(
                "env.privileged_critic: needs policy TenantPolicy (whose actor does not read the "
                f"critic's entries; {self.policy} would)"
            )

    def _imitation_rules(self) -> None:
        if len(base_names(self.env.base_policy)) < 2:
            raise ValueError(
                "imitation: needs env.base_policy with at least two heuristics to choose "
                f"between (got {self.env.base_policy!r})"
            )
        if self.algo not in ("ppo", "a2c"):
            raise ValueError(
                f"imitation: the fit trains a Gaussian policy's mean (ppo, a2c), not {self.algo}'s"
            )
        if self.imitation is not None and self.imitation.plans and self.env.residual_bases is None:
            raise ValueError(
                "imitation.plans: true needs env.residual_bases (the plans are fitted as the "
                "residual over its first base)"
            )

    @property
    def trainers(self) -> list[str]:
        """What the recipe runs, in order: ``imitation`` (DAgger), then the algorithm."""
        return (["imitation"] if self.imitation is not None else []) + (
            [self.algo] if self.total_timesteps > 0 else []
        )
