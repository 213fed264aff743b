"""Calibrate the hardware presets on Intel MLC loaded-latency curves, and validate them.

Offline tooling: nothing in ``envs``, ``baselines``, ``agents``, ``train.py`` or
``evaluate.py`` imports it. Commands (from the project root)::

    python -m calibration              # fit spr-a1000 / spr-a1000-2s, derive spr-4cxl, write the YAML
    python -m calibration --report     # regenerate docs/validation.md and docs/img/*.png
    python -m calibration --check      # print the must-show checks; exit status 1 if one fails
    python -m calibration --data DIR   # read the measurements from DIR (default ../shared/calibration)
    python -m calibration probe -o machine.yaml   # this host's memory nodes (read only)
    python -m calibration mlc LOG... -o node.yaml # a node fitted to MLC loaded-latency logs
    python -m calibration damon damon.data --gbps X -o tenant.yaml  # a tenant from DAMON

Modules, by concern:

- :mod:`calibration.data`: paths, the measured MLC series (CSV loading) and their labels;
- :mod:`calibration.bench`: the MLC test rebuilt as a scenario and run through the model;
- :mod:`calibration.metrics`: measured vs model, per memory and mix;
- :mod:`calibration.fit`: the fitted parameters and the bounded least-squares fit;
- :mod:`calibration.presets`: the preset mappings and their YAML files;
- :mod:`calibration.checks`: the spr-4cxl weighted-interleave experiment and the must-show list;
- :mod:`calibration.report`, :mod:`calibration.plots`: docs/validation.md and its figures;
- :mod:`calibration.cli`: the command line (``python -m calibration``).
- :mod:`calibration.probe`, :mod:`calibration.mlc`, :mod:`calibration.damon`: your machine
  and your workload (docs/your-machine.md).

The measurement (``loaded_latency_fig3_seq.csv``, see ``../shared/calibration/README.md``)
is MLC's ``--loaded_latency`` test: 16 traffic threads stream over a buffer on one memory
node with a read:write mix and an injection delay, and one more thread measures the
latency of dependent reads. It is reproduced *inside the model*, as a scenario: a tenant
``mlc`` with 16 threads and the mix's ``read_fraction``, all of its pages on the measured
node (interleave weights), its threads on socket 0 (local memories, preset ``spr-a1000``)
or socket 1 (remote memories, preset ``spr-a1000-2s``). MLC's injection delay becomes the
tenant's ``compute_ns``: for each measured point, ``compute_ns`` is solved (bisection) so
that the closed-loop fixed point of :func:`envs.solver.solve_fixed_point`, on the arrays
:func:`envs.model.compile_params` builds from that scenario, carries exactly the measured
bandwidth. The model's probe latency is then the loaded latency of an access to that node:
``node_latency_ns`` for a local node, the tenant's latency (which adds the remote path)
for a remote one. ``tests/calibration/test_calibration.py`` checks that :class:`envs.Simulator` gives
the same numbers.

Definitions used in the fit and the report:

- *measured idle latency*: the latency of the lowest-load point (inject delay 20000
  cycles) of the 16-thread 1:0 series, i.e. the paper's "initial latency" (97.0 ns local
  DDR5, 250.4 ns CXL, 485.2 ns remote CXL). The model's idle latency is its probe
  latency at that same bandwidth. Per-mix lowest-load points are reported too.
- *measured peak*: the highest bandwidth of the 16-thread series (the series the scenario
  reproduces); the highest over all thread counts is reported beside it. The *model peak*
  is the closed loop's throughput with ``compute_ns = 0`` and unbounded requests in
  flight, i.e. the capacity of the bottleneck resource at that mix.
- *saturated points*: the first point at or above 95% of the series' peak and every point
  after it (smaller delays). There the closed loop is saturated: bandwidth stays at the
  peak and latency grows with the number of requests MLC keeps in flight (Little's law),
  not with load, so such a point has no place on the curve below the peak. They set the
  measured peak and are left out of the latency fit and of the latency errors.
- the latency error is ``|model - measured| / measured`` at the measured bandwidth; the
  must-show statistic is its median over the non-saturated points up to 90% of the peak.

The fit (:func:`calibration.fit.fit`) uses ``scipy.optimize.least_squares`` on log
latency errors of the non-saturated points plus log peak errors, one memory at a time,
seven physical parameters each (listed in :data:`calibration.fit.PARAMETERS`).
"""
