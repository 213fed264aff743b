"""Compare learned and heuristic placement policies on TierGym, fairly.

Every policy runs on the same scenarios with the same seeds (common random
numbers), vectorized over episodes. Per scenario and policy: mean and
interquartile mean of each episode metric with 95% percentile-bootstrap
intervals over episodes, and the mean ratio of the primary metric to a
reference policy on the same seeds; across scenarios, the geometric mean of
those ratios with an interval stratified by scenario (docs/training.md and
``agents.report.summarize_records`` say exactly how). When ``planner`` and
``dram-first`` are both compared, each policy's share of the headroom,
``(policy - dram-first) / (planner - dram-first)`` on geomean_perf, per scenario
and across scenarios (``summary["headroom"]``, a second table, a leaderboard
column). ``planner`` is clairvoyant (it replays each episode from its seed and
searches its actions): an upper bound, not a deployable policy; so is
``best-heuristic-per-episode`` (per episode, the best shipped heuristic).

Examples::

    python evaluate.py                                    # every heuristic on every shipped scenario
    python evaluate.py --scenarios kv-store,mixed --policies dram-first,tpp,runs/mixed__imitation__0__...
    python evaluate.py --policies static:3:1@256,numa-tiering --episodes 64 --output results/kv
    python evaluate.py --scenarios mixed --policies runs/mixed__host-ppo__0__...    # + the host heuristics

``--references`` adds policies beside ``--policies`` (after them, repeats dropped): names,
``host`` (the catalogue's heuristics a Linux host can run, ``names(host=True)`` of
``baselines/catalogue.py``) or ``none``. Without it, a run trained on the host view
(``observation="host"``, what ``deploy.py`` runs) among ``--policies`` is compared with
the heuristics a host can run, and nothing is added otherwise.

Outputs (in ``--output``): ``results.json`` (one record per scenario, policy
and episode seed, plus the summary), ``results.csv``, ``table.md``,
``leaderboard.md``, ``ratio.png`` and ``timeseries-<scenario>-<policy>.png``;
the Markdown table and leaderboard go to stdout. The work is
:func:`agents.evaluation.run_comparison`.

Everything is checked before the first episode: every flag's value, the
output folder, every scenario, and every policy against every scenario
(spaces, tenant slots, number of weights); a problem is a one-line error and
exit code 2, and no results are written. Trained models load from their safe
files; a stable-baselines3 pickle ``model.zip`` is refused.
"""

from __future__ import annotations

import sys
from typing import Any

from agents import report
from agents.config import EvaluateOptions
from agents.config.flags import flag_parser, parse_flags
from agents.config.run import HOST_REFERENCES, NO_REFERENCES
from agents.distributed import ray_runner  # --workers / --ray-address: Ray tasks
from agents.evaluation import check_output_dir, leaderboard_text, load_policy, run_comparison
from baselines import catalogue
from envs.errors import report_error
from envs.generator import expand_family_names
from envs.jit import get_threads


#: ``--references`` values that stand for a list: the heuristics a host can run, or none.
def parse_args(argv: list[str]) -> EvaluateOptions:
    """The checked options (one flag per field of :class:`agents.config.EvaluateOptions`)."""
    return parse_flags(EvaluateOptions, flag_parser(EvaluateOptions, "evaluate.py", __doc__), argv)[
        0
    ]


def validate_args(
    args: EvaluateOptions,
) -> tuple[list[str], list[str], dict[str, float] | None]:
    """The output folder checked (nothing run, nothing written); the policy and scenario
    lists and the generator's chances (``--generator-chances``, None where not given)."""
    check_output_dir(args.output, "--output")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    scenarios = expand_family_names(s.strip() for s in args.scenarios.split(",") if s.strip())
    if not policies:
        raise ValueError(f"--policies {args.policies!r}: expected at least one policy")
    if not scenarios:
        raise ValueError(f"--scenarios {args.scenarios!r}: expected at least one scenario")
    return policies, scenarios, args.chances()


def is_host_view(env_kwargs: dict[str, Any]) -> bool:
    """Whether a loaded policy's env settings are the host view's (a trained run that
    ``deploy.py`` may run on a host)."""
    return env_kwargs.get("observation") == "host"


def with_references(
    policies: list[str], references: str | None
) -> list[str | tuple[Any, dict[str, Any]]]:
    """``policies`` (trained runs loaded once, here) and then the ``--references`` that are
    not among them: a list of names, ``host`` (:func:`baselines.catalogue.names` with
    ``host=True``), ``none``, or by default ``host`` if a trained run among ``policies``
    has the host view and none otherwise.

    Raises:
        ValueError: a policy that does not load, or an empty ``--references`` entry.
    """
    loaded: list[str | tuple[Any, dict[str, Any]]] = []
    host_run = False
    for spec in policies:
        if spec.split("=", 1)[-1] in catalogue.names() or spec.startswith("static:"):
            loaded.append(spec)  # a heuristic: built by the comparison
            continue
        pair = load_policy(spec)
        host_run |= is_host_view(pair[1])
        loaded.append(pair)
    if references is None:
        references = HOST_REFERENCES if host_run else NO_REFERENCES
    if references == NO_REFERENCES:
        return loaded
    if references == HOST_REFERENCES:
        extra = catalogue.names(host=True)
    else:
        extra = [r.strip() for r in references.split(",")]
        if not all(extra):
            raise ValueError(f"--references {references!r}: an empty entry")
    given = {p.split("=", 1)[0] for p in policies}  # a heuristic's name, or a LABEL=
    return loaded + [r for r in extra if r not in given]


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the comparison and print its tables; the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        get_threads()  # TIERGYM_THREADS, checked before any work
        args = parse_args(argv)
        policies, scenarios, chances = validate_args(args)
        summary = run_comparison(
            with_references(policies, args.references),
            scenarios,
            args.episodes,
            args.output,
            seed=args.seed,
            split=args.split,
            reference=args.reference,
            metric=args.metric,
            plots=not args.no_plots,
            show_progress=not args.no_progress,
            command=["evaluate.py", *argv],
            generator_chances=chances,
            runner=ray_runner(args.workers, args.ray_address),
        )
    except SystemExit as exc:  # --help (0) or a one-line argparse error (2)
        return exc.code if isinstance(exc.code, int) else 2
    except ValueError as exc:  # one line (TIERGYM_TRACEBACK=1: the traceback too)
        return report_error(exc)
    print(report.markdown_table(summary, metric=args.metric))
    print()
    print(leaderboard_text(summary), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
