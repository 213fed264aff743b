"""A sweep's results, from its trial folders: the ranked table (CSV, Markdown), the plot,
and the best trial's resolved recipe (``best.yml``, for ``train.py --recipe``)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from agents.runs import read_config
from agents.sweep.plan import hp_text, short
from agents.sweep.spec import SweepSpec

__all__ = ["best_recipe", "summarize_sweep"]

#: ``train:`` options that are flags of the task, not recipe keys: the best recipe's
#: command repeats them.
TASK_FLAGS = ("split", "reward", "weights", "action_type")


class _RecipeDumper(yaml.SafeDumper):
    """YAML as the shipped recipes read: mappings in blocks, lists of values on one line."""


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> Any:
    flat = not any(isinstance(v, dict | list) for v in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flat)


_RecipeDumper.add_representer(list, _list)


def _status(spec: SweepSpec, failed: bool, stages: int, n: int) -> str:
    if failed:
        return "error"
    if stages >= n:
        return "complete"
    return "stopped early" if spec.scheduled else "incomplete"


def _trial_rows(out: Path, spec: SweepSpec, errors: Mapping[int, str]) -> list[dict[str, Any]]:
    rows = []
    for f in sorted((out / "trials").glob("*/sweep_trial.json")):
        st = json.loads(f.read_text())
        stages = st.get("stages", [])
        idx = int(f.parent.name.split("-", 1)[0])
        n = len(st.get("targets", [])) or spec.reports
        last = stages[-1] if stages else {}
        point = st["config"]
        rows.append(
            {
                "trial": f.parent.name,
                "recipe": point["recipe"],
                "scenario": point["scenario"],
                "seed": point["seed"],
                "hp": point.get("hp", {}),
                "objective": last.get("objective"),
                "timesteps": last.get("timesteps", 0),
                "reports": f"{len(stages)}/{n}",
                "status": _status(spec, idx in errors, len(stages), n),
                "wall_s": round(sum(s.get("wall_s", 0.0) for s in stages), 1),
                "stages": stages,
                "run_dir": str(f.parent),
            }
        )
    # trials that failed before their first stage have no sweep_trial.json
    for idx, msg in errors.items():
        if not any(int(r["trial"].split("-", 1)[0]) == idx for r in rows):
            rows.append({"trial": f"{idx:03d}", "recipe": "", "scenario": "", "seed": "", "hp": {},
                         "objective": None, "timesteps": 0, "reports": f"0/{spec.reports}",
                         "status": "error", "wall_s": 0.0, "stages": [], "run_dir": "",
                         "error": msg})  # fmt: skip
    return rows


def _scored(r: Mapping[str, Any]) -> bool:
    return r["objective"] is not None and math.isfinite(r["objective"])


def _rank_key(spec: SweepSpec) -> Callable[[dict[str, Any]], tuple[int, float]]:
    sign = -1.0 if spec.mode == "max" else 1.0

    def key(r: dict[str, Any]) -> tuple[int, float]:
        ok = _scored(r)
        # complete trials first (a stopped trial's score is at a smaller budget), then the score
        rank = 0 if r["status"] == "complete" and ok else 1 if ok else 2
        return rank, sign * r["objective"] if ok else 0.0

    return key


def _table(
    rows: list[dict[str, Any]], spec: SweepSpec, out: Path
) -> tuple[list[str], list[dict[str, Any]]]:
    """The summary's columns and one row per trial, ranked."""
    hp_cols = [k for k in spec.varying() if k not in ("recipe", "scenario", "seed")]
    cols = ["rank", "trial", "recipe", "scenario", "seed", *hp_cols, spec.metric,
            "timesteps", "reports", "status", "wall_s", "run_dir"]  # fmt: skip
    table = [
        {
            "rank": i,
            **{k: r[k] for k in ("trial", "recipe", "scenario", "seed")},
            **{k: r["hp"].get(k) for k in hp_cols},
            spec.metric: r["objective"],
            **{k: r[k] for k in ("timesteps", "reports", "status", "wall_s")},
            "run_dir": str(Path(r["run_dir"]).relative_to(out)) if r["run_dir"] else "",
        }
        for i, r in enumerate(rows, 1)
    ]
    return cols, table


def _write_csv(path: Path, cols: list[str], table: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for row in table:
            w.writerow(
                {k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in row.items()}
            )


def _markdown(spec: SweepSpec, cols: list[str], table: list[dict[str, Any]]) -> str:
    def cell(col: str, v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float) and col == spec.metric:
            return f"{v:.4f}" if abs(v) < 1e4 else f"{v:,.1f}"
        if isinstance(v, float) and col == "wall_s":
            return f"{v:.1f}"
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 1e4:
            return f"{v:,}"
        return short(v).replace("|", "\\|")

    o = spec.objective
    md = [
        f"Sweep `{spec.name}`: {len(table)} trial(s), objective {spec.metric} ({spec.mode}) "
        f"on {o.episodes} validation episode(s) from seed {o.seed} ({o.split} split)",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    md += ["| " + " | ".join(cell(c, row[c]) for c in cols) + " |" for row in table]
    return "\n".join(md) + "\n"


def best_recipe(run: Path, name: str, summary: str) -> dict[str, Any]:
    """The recipe a run trained, resolved (its ``config.yml``: the sweep's values, the
    budget), as a recipe file's mapping named ``name``; the layout TenantPolicy derives from
    the environment is left out (the trainer fills it in)."""
    recipe = read_config(run).recipe.model_dump(mode="json", exclude_none=True)
    recipe.get("policy_kwargs", {}).pop("layout", None)
    return {**recipe, "name": name, "summary": summary}


def _write_best(out: Path, spec: SweepSpec, best: dict[str, Any]) -> dict[str, Any]:
    """``best.yml`` (the best trial's recipe) and ``best.json``; the latter's content."""
    run = Path(best["run_dir"])
    cfg = read_config(run)
    o = spec.objective
    summary = (
        f"The best trial of sweep {spec.name} ({best['trial']}): recipe {cfg.recipe.name}"
        + (f" with {hp_text(best['hp'])}" if best["hp"] else "")
        + f", {spec.metric} {best['objective']:.6g} on its validation episodes."
    )
    recipe = best_recipe(run, f"{spec.name}-best", summary)
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in spec.train_options().items()
             if k in TASK_FLAGS]  # fmt: skip
    command = " ".join(["python train.py", f"--recipe {out / 'best.yml'}",
                        f"--scenario {cfg.task.scenario}", f"--seed {cfg.seed}", *flags])  # fmt: skip
    header = [
        f"# Best recipe of sweep {spec.name} ({out}):",
        f"# the resolved recipe of trial {best['trial']} (run folder {run}),",
        f"# {spec.metric} {best['objective']:.6g} after {best['timesteps']:,} steps ({best['status']})",
        f"# on {o.episodes} validation episode(s) from seed {o.seed} ({o.split} split).",
        "# Train with it (add --timesteps N for another budget):",
        f"#   {command}",
    ]
    body = yaml.dump(recipe, Dumper=_RecipeDumper, sort_keys=False, width=96)
    (out / "best.yml").write_text("\n".join(header) + "\n" + body)
    info = {
        "trial": best["trial"],
        "run_dir": str(run),
        "metric": spec.metric,
        "mode": spec.mode,
        "objective": best["objective"],
        "timesteps": best["timesteps"],
        "status": best["status"],
        "config": {k: best[k] for k in ("recipe", "scenario", "seed", "hp")},
        "recipe_file": str(out / "best.yml"),
        "command": command,
    }
    (out / "best.json").write_text(json.dumps(info, indent=1))
    return info


def summarize_sweep(
    out: str | Path, spec: SweepSpec, errors: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """The sweep's summary table (CSV, Markdown), plot and best recipe, from the trial folders.

    The best trial is the best objective among the trials that ran their whole budget
    (among all, if none did); ``best.yml`` is its resolved recipe, named ``NAME-best``, for
    ``train.py --recipe``. Returns ``{"rows": [...], "best": {...} | None, "files": [...],
    "markdown": str}``.
    """
    out = Path(out)
    rows = sorted(_trial_rows(out, spec, errors or {}), key=_rank_key(spec))
    cols, table = _table(rows, spec, out)
    _write_csv(out / "summary.csv", cols, table)
    md = _markdown(spec, cols, table)
    (out / "summary.md").write_text(md)
    files = ["summary.csv", "summary.md"]
    if any(r["stages"] for r in rows):
        _plot(rows, spec, out / "summary.png")
        files.append("summary.png")
    best = next((r for r in rows if _scored(r)), None)
    best_info = None
    if best is not None:
        best_info = _write_best(out, spec, best)
        files += ["best.yml", "best.json"]
    return {"rows": table, "best": best_info, "files": files, "markdown": md}


def _plot(rows: list[dict[str, Any]], spec: SweepSpec, path: Path) -> None:
    """Objective against timesteps for every trial (left) and each trial's last score (right)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 0.5 + max(4.5, 0.28 * len(rows))))
    FigureCanvasAgg(fig)
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    best = rows[0]["trial"] if rows else None
    for r in rows:
        if not r["stages"]:
            continue
        xs = [s["timesteps"] for s in r["stages"]]
        ys = [s["objective"] for s in r["stages"]]
        lw, alpha = (2.5, 1.0) if r["trial"] == best else (1.0, 0.6)
        label = r["trial"] if r["trial"] == best else None
        ax.plot(xs, ys, marker="o", lw=lw, alpha=alpha, label=label)
    ax.set_xlabel("timesteps")
    ax.set_ylabel(f"{spec.metric} (validation)")
    ax.set_title(f"sweep {spec.name}: every trial at each report")
    ax.grid(alpha=0.3)
    if best:
        ax.legend(loc="best", fontsize=8, title="best")
    scored = [r for r in rows if _scored(r)]
    names = [f"{r['trial']} ({r['status']})" for r in scored][::-1]
    vals = [r["objective"] for r in scored][::-1]
    colors = ["tab:green" if r["trial"] == best else "tab:blue" if r["status"] == "complete" else "tab:gray"
              for r in scored][::-1]  # fmt: skip
    bx.barh(range(len(vals)), vals, color=colors)
    bx.set_yticks(range(len(vals)))
    bx.set_yticklabels(names, fontsize=7)
    if vals:
        lo, hi = min(vals), max(vals)
        pad = (hi - lo) * 0.1 or abs(hi) * 0.01 or 0.01
        bx.set_xlim(lo - pad, hi + pad)
    bx.set_xlabel(f"{spec.metric} at the last report")
    bx.set_title("ranked (green: best, gray: stopped early)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
