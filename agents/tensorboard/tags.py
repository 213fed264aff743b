"""The tags a training run writes to TensorBoard, and the description of each.

Every tag says its unit in its name (``GBps`` = GB/s, ``MBps`` = MB/s, ``GiB``,
``ns``, ``_frac`` = a fraction in 0..1) and keeps one of the namespaces

- ``env/``: means over one rollout of the training environment (every instance
  and step of the rollout), per node (``env/node/<node>/...``), per tenant slot
  (``env/tenant_slot<k>/...``), migration, the policy's actions
  (``env/action/...``), the reward terms (``env/reward/...``, the trained one
  marked ``(trained)``) and the model's solver;
- ``eval/``: :data:`EVAL`, the mean ``geomean_perf`` on the held-out episodes, of the
  learned policy in the run's own folder and of each reference heuristic on the same
  episodes in a sub-folder named after it (:func:`reference_run`): TensorBoard colours
  and names lines by run (event-file folder), so one chart of the tag shows every
  policy in its own colour, named ``eval/geomean_perf (<run>/<reference>)``;
- ``eval_ratio/``: the learned policy over the best reference and over
  ``dram-first``, with the bounds of a bootstrap interval as their own tags;
- ``time/``, ``train/``, ``rollout/``: stable-baselines3's own, plus
  ``time/env_sps`` and ``time/eval_s``.

The tag builders (:func:`node_tag`, :func:`slot_tag`, :func:`reward_tag`,
:func:`reference_run`, :func:`ratio_tags`, ...) and constants name them once;
:func:`describe` gives each tag its description (written once per tag in the
``SummaryMetadata``, so TensorBoard shows it with the card).
"""

from __future__ import annotations

import re

__all__ = [
    "ACTION_PROMOTE",
    "DEMOTION",
    "ENV_SPS",
    "EPISODE_RETURN",
    "EVAL",
    "EVAL_SECONDS",
    "EXPLAINED_VARIANCE",
    "METRIC",
    "NODE_QUANTITIES",
    "PROMOTION",
    "REWARD_TERMS",
    "SLOT_QUANTITIES",
    "SOLVER_MAX",
    "SOLVER_MEAN",
    "START",
    "THROUGHPUT",
    "action_local_first_tag",
    "action_page_tag",
    "describe",
    "node_tag",
    "ratio_tags",
    "reference_run",
    "reward_tag",
    "slot_tag",
]

#: The metric of ``eval/`` and ``eval_ratio/`` (an episode's geometric-mean performance).
METRIC = "geomean_perf"
#: Every policy's held-out evaluation, one tag for all: the learned policy's in the run's
#: TensorBoard folder, each reference's in its own sub-folder (:func:`reference_run`).
EVAL = f"eval/{METRIC}"
#: ``eval_ratio/<policy>_vs_start``: the policy over itself at step 0 of RL (the learning curve).
START = "start"
#: The paired return (with ``reward_baseline``: the agent's return minus the twin's).
EPISODE_RETURN = "rollout/ep_rew_mean"
EXPLAINED_VARIANCE = "train/explained_variance"

# ---------------------------------------------------------------------------- tag names

NODE_QUANTITIES = {
    "bandwidth_GBps": "Bandwidth (reads + writes, migrations included) of node {x}, GB/s.",
    "latency_ns": "Loaded latency of a local access to node {x}, ns.",
    "utilization_frac": (
        "Utilisation of node {x}'s bottleneck resource (memory or CXL link), "
        "0..1: bandwidth over the peak at this interval's read:write mix."
    ),
    "capacity_used_GiB": "Memory in use on node {x}, GiB.",
    "capacity_used_frac": "Memory in use on node {x} over its capacity, 0..1.",
}
SLOT_QUANTITIES = {
    "norm_perf_vs_alone": (
        "Normalised performance of the tenant in slot {x}: its throughput over the same "
        "tenant's throughput alone in local DRAM (1 = no slowdown). Mean over the steps "
        "the slot is active; in a family (mixed) the slot holds different tenants in "
        "different episodes."
    ),
    "dram_access_frac": (
        "Share of the accesses of the tenant in slot {x} served by DRAM nodes, 0..1 "
        "(mean over active steps)."
    ),
    "latency_ns": "Mean memory latency seen by the tenant in slot {x}, ns (active steps).",
    "dram_resident_GiB": "Pages of the tenant in slot {x} resident in DRAM, GiB (active steps).",
}


def node_tag(node: str, quantity: str) -> str:
    """``env/node/<node>/<quantity>`` (a key of :data:`NODE_QUANTITIES`)."""
    return f"env/node/{node}/{quantity}"


def slot_tag(slot: int | str, quantity: str) -> str:
    """``env/tenant_slot<k>/<quantity>``; ``slot="s"`` gives ``env/tenants/...`` (all slots)."""
    return f"env/tenant_slot{slot}/{quantity}" if slot != "s" else f"env/tenants/{quantity}"


def action_page_tag(slot: int, node: str) -> str:
    """``env/action/tenant_slot<k>/page_frac_<node>``: the weights' new-page share on a node."""
    return f"env/action/tenant_slot{slot}/page_frac_{node}"


def action_local_first_tag(slot: int) -> str:
    """``env/action/tenant_slot<k>/local_first_frac``: the share of local-first steps."""
    return f"env/action/tenant_slot{slot}/local_first_frac"


ACTION_PROMOTE = "env/action/promote_limit_MBps"
PROMOTION = "env/migration/promotion_MBps"
DEMOTION = "env/migration/demotion_MBps"
THROUGHPUT = "env/system/throughput_GBps"
SOLVER_MEAN = "env/solver/residual_mean"
SOLVER_MAX = "env/solver/residual_max"
ENV_SPS = "time/env_sps"
EVAL_SECONDS = "time/eval_s"
REWARD_TERMS = ("log_geomean", "throughput", "weighted_speedup", "harmonic")


def reward_tag(term: str, trained: str | None) -> str:
    """``env/reward/<term>``, with `` (trained)`` for the term the run trains on.

    ``term`` is a reward-term name (``log_geomean``) and ``trained`` the run's
    ``--reward`` (``log-geomean``) or ``None``.
    """
    mark = trained is not None and trained.replace("-", "_") == term
    return f"env/reward/{term}" + (" (trained)" if mark else "")


def reference_run(reference: str) -> str:
    """The sub-folder of the run's TensorBoard folder that holds ``reference``'s evaluation
    (its TensorBoard run): the reference's name, with anything but letters, digits, ``-``,
    ``_`` and ``.`` replaced by ``_`` (a name is one folder, never a path)."""
    name = re.sub(r"[^\w.-]", "_", reference)
    return "_" + name if name.startswith(".") or not name else name


def ratio_tags(algo: str, versus: str) -> tuple[str, str, str]:
    """``(value, lower, upper)`` tags of the learned policy's ratio to ``versus``.

    ``versus`` is ``"best_ref"`` (the best reference of the run) or a reference name.
    """
    base = f"eval_ratio/{algo}_vs_{versus}"
    return base, base + "_low", base + "_high"


# ---------------------------------------------------------------------------- descriptions

#: The descriptions of the tags with fixed names: stable-baselines3's, the speed, the
#: environment's batch-wide means and the held-out evaluation.
_FIXED = {
    "time/fps": "Training steps per second of wall time since this process started learning.",
    "time/iterations": "Rollouts collected so far by this process.",
    "time/time_elapsed": "Seconds since this process started learning.",
    "time/total_timesteps": "Environment steps so far (instances x steps).",
    ENV_SPS: "Environment steps per second of wall time spent inside the environment.",
    EVAL_SECONDS: "Wall time of this evaluation (rollout of the learned policy, ratios), s.",
    EPISODE_RETURN: (
        "Mean return of the episodes finished recently (VecMonitor); with env.reward_baseline "
        "the paired return: the policy's minus its twin's under the baseline heuristic, on "
        "the same episode (0: as good as the heuristic)."
    ),
    "rollout/ep_len_mean": "Mean length, in steps, of the episodes finished recently.",
    "train/learning_rate": "Learning rate of this update.",
    "train/n_updates": "Gradient steps so far.",
    "train/loss": "Total loss of the last minibatch of this update.",
    "train/value_loss": "Value-function loss, mean over this update.",
    "train/policy_gradient_loss": "Policy-gradient (clipped surrogate) loss, mean over this update.",
    "train/entropy_loss": "Negative entropy of the policy, mean over this update.",
    "train/approx_kl": "Approximate KL divergence between the old and the new policy.",
    "train/clip_fraction": "Fraction of samples whose probability ratio was clipped.",
    "train/clip_range": "PPO's clip range.",
    EXPLAINED_VARIANCE: "Explained variance of the value function on this rollout.",
    "train/critic_warmup": "1 while the update trains the value function alone (actor frozen).",
    "train/anchor_coef": "Weight of the anchor to the policy RL started from, this update.",
    "train/anchor_mse": "Squared distance of the action mean to the starting policy's.",
    "train/std": "Standard deviation of the Gaussian policy (mean over action entries).",
    ACTION_PROMOTE: (
        "Policy action: the promotion rate limit set (numa_balancing_promote_rate_limit_MBps), MB/s."
    ),
    PROMOTION: "Pages promoted from CXL to DRAM, MB/s.",
    DEMOTION: "Pages demoted from DRAM to CXL (kswapd, memory.high), MB/s.",
    THROUGHPUT: "Memory throughput of all tenants together, GB/s.",
    SOLVER_MEAN: "Residual of the model's fixed point (rates and loaded latencies), mean over steps.",
    SOLVER_MAX: "Largest residual of the model's fixed point in the rollout (solver health).",
    slot_tag("s", "norm_perf_vs_alone"): (
        "Normalised performance (throughput over alone in local DRAM) of every active tenant, mean."
    ),
    EVAL: (
        f"Mean {METRIC} (geometric mean of tenants' normalised performance per episode) "
        "over the held-out validation-split evaluation episodes, of the policy of this run "
        "folder: the learned policy in the run's own TensorBoard folder, a reference "
        "heuristic in the sub-folder named after it (scored once on the same episodes: "
        "a flat line)."
    ),
}


def describe(tag: str) -> str | None:
    """The description of a tag this project writes (``None`` for one it does not know)."""
    if tag in _FIXED:
        return _FIXED[tag]
    m = re.fullmatch(r"env/node/([^/]+)/(\w+)", tag)
    if m and m.group(2) in NODE_QUANTITIES:
        return NODE_QUANTITIES[m.group(2)].format(x=m.group(1)) + " Mean over the rollout."
    m = re.fullmatch(r"env/tenant_slot(\d+)/(\w+)", tag)
    if m and m.group(2) in SLOT_QUANTITIES:
        return SLOT_QUANTITIES[m.group(2)].format(x=m.group(1))
    m = re.fullmatch(r"env/action/tenant_slot(\d+)/page_frac_(.+)", tag)
    if m:
        return (
            f"Policy action: share of slot {m.group(1)}'s new pages its interleave weights place "
            f"on node {m.group(2)} (weight over the sum of its weights), 0..1; mean over the "
            "active steps that interleave (local-first steps are in local_first_frac)."
        )
    m = re.fullmatch(r"env/action/tenant_slot(\d+)/local_first_frac", tag)
    if m:
        return (
            f"Policy action: fraction of slot {m.group(1)}'s active steps with every weight 0, "
            "i.e. local-first allocation (no interleave)."
        )
    m = re.fullmatch(r"env/reward/(\w+)( \(trained\))?", tag)
    if m:
        what = {
            "log_geomean": "log of the geometric mean of active tenants' normalised performance",
            "throughput": "total throughput over the machine's read peak",
            "weighted_speedup": "mean normalised performance of active tenants",
            "harmonic": "harmonic mean of active tenants' normalised performance",
        }.get(m.group(1), m.group(1))
        trained = " This is the term the policy is trained on." if m.group(2) else ""
        return f"Reward term: {what}, mean per step.{trained}"
    m = re.fullmatch(r"eval_ratio/(.+)_vs_(.+?)(_low|_high)?", tag)
    if m:
        ref = {
            "best_ref": "the best reference",
            START: "itself at step 0 of RL (a fine-tuning recipe: the imitation policy)",
        }.get(m.group(2), m.group(2))
        bound = {"_low": "Lower bound of ", "_high": "Upper bound of ", None: ""}[m.group(3)]
        return (
            f"{bound}{m.group(1)} over {ref}: mean over the evaluation episodes of the paired "
            f"ratio of {METRIC} (same seed), 95% percentile bootstrap over the episodes."
        )
    return None
