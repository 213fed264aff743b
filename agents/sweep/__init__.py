"""Sweeps on Ray Tune: seeds, scenarios, recipes and their settings, one run folder per trial.

A sweep file (YAML, :mod:`agents.sweep.spec`) names the grid or search space, the budget of
a trial, the objective (an evaluation metric on validation seeds) and optionally a scheduler
that stops poor trials early. :func:`agents.sweep.run.run_sweep` runs the trials as Ray Tune
trials, locally (Ray in-process on the local cores) or on a cluster (``address`` /
``$RAY_ADDRESS``), and writes::

    SWEEP_DIR/
      sweep.yml            the sweep file (a rerun checks it is the same sweep)
      trials/<trial>/      ordinary run folders (config.yml, model.zip, checkpoints/,
                           tensorboard/) plus sweep_trial.json (its stages and objective)
      tune/                Ray Tune's experiment state (what an interrupted sweep resumes from)
      summary.csv, summary.md, summary.png   every trial, ranked by the objective
      best.yml             the best trial's resolved recipe: train.py --recipe takes it
      best.json            the best trial, its objective, run folder and train.py command

A trial trains in ``budget.reports`` stages with :func:`agents.trainer.run`, in this
process: the first stage is a new run (``RunOptions(run_dir=RUN, timesteps=T1, ...)``),
each next one resumes it (``RunOptions(resume=RUN, timesteps=Tk)``, whole rollouts); after
each stage the latest checkpoint is scored on the validation episodes and the score
reported to Tune (and written to the run's TensorBoard as ``sweep/<metric>``); a scheduler
compares trials at these reports. The environment stays one batched process per trial: Ray
distributes runs, never steps.

An interrupted sweep resumes when the same command is run again: Tune restores its trials,
and a trial picks up from its run folder (stages already scored are not trained again, a
stage cut short resumes from its last checkpoint).

The modules: :mod:`~agents.sweep.spec` (the sweep file's schema), :mod:`~agents.sweep.plan`
(each trial's options, checked before any trial starts), :mod:`~agents.sweep.trial` (a
trial, Tune's class API), :mod:`~agents.sweep.progress` (the trial lines and the bar),
:mod:`~agents.sweep.run` (the sweep on Ray) and :mod:`~agents.sweep.summary` (the ranked
tables, the plot and the best recipe). Import them by their module: this file re-exports
nothing, so the package's modules import each other without a cycle through it.
"""
