"""The compiled code's decorators and cache (envs/jit.py)."""

from __future__ import annotations

import ast
import importlib
import multiprocessing as mp
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import envs.jit as jit_module
from envs.kernel import kswapd_failures_after, memcg_reclaim_scan, reclaim_scan

ENVS = Path(jit_module.__file__).parent


def test_every_module_with_compiled_code_keys_the_cache() -> None:
    # a kernel inlines helpers of other modules: numba's own cache would keep their old
    # code after an edit, so the stamp covers every module that compiles anything
    # (the thread count's controls compile nothing: envs/__init__.py re-exports one)
    controls = {"set_threads", "get_threads", "may_thread", "THREADS_VAR"}
    compiling = set()
    for path in ENVS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "envs.jit" for a in node.names):
                compiling.add(path.name)
            if isinstance(node, ast.ImportFrom) and node.module == "envs.jit":
                if {a.name for a in node.names} - controls:
                    compiling.add(path.name)
    assert compiling, "no module imports envs.jit"
    assert compiling | {"jit.py"} <= set(jit_module.COMPILED)
    assert all((ENVS / name).is_file() for name in jit_module.COMPILED)


def test_the_stamp_is_the_contents_of_the_compiled_modules() -> None:
    stamp = jit_module._sources_stamp()
    assert isinstance(stamp, bytes) and len(stamp) == 32
    jit_module._sources_stamp.cache_clear()
    assert jit_module._sources_stamp() == stamp  # the same files: the same stamp


def test_a_read_only_package_caches_in_the_user_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    # an install whose __pycache__ cannot be written: numba's user-wide cache instead
    monkeypatch.setattr(
        jit_module._Locator, "from_function", classmethod(lambda cls, f, path: None)
    )

    def twice(x: np.ndarray) -> float:
        return float(x.sum()) * 2.0

    compiled = jit_module.jit(twice)
    assert type(compiled._cache._impl.locator) is jit_module._UserLocator
    assert compiled(np.ones(3)) == 6.0


def test_any_layout_compiles_one_signature_for_every_layout_with_the_same_numbers() -> None:
    import numba

    def affine(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                out[i, j] = 2.0 * a[i, j] + b[i, j] / 3.0

    once, each = jit_module.jit_any_layout()(affine), jit_module.jit(affine)
    misses: list[tuple[Any, ...]] = []
    found = once._compile_for_args  # numba calls it where no compiled entry fits the call

    def spy(*args: Any) -> Any:
        misses.append(args)
        return found(*args)

    once._compile_for_args = spy
    x = np.arange(24.0).reshape(4, 6) / 7.0
    # C, Fortran and strided views; a single row is C-ordered to numba
    views = [x, np.asfortranarray(x), x[:, ::2], x[::2].T, x[:1], np.asfortranarray(x)[:1]]
    kinds = set()
    for a in views:
        got, want = np.empty(a.shape), np.empty(a.shape)
        once(a, a, got)
        once(a, a, got)  # again: straight to the compiled code
        each(a, a, want)
        np.testing.assert_array_equal(got, want)
        kinds.add((numba.typeof(a), numba.typeof(got)))
    assert len(once.signatures) == 1  # one compile
    assert len(each.signatures) == len(kinds) == 3  # numba's own: one per layout
    assert len(misses) == len(kinds)  # each kind of call looked up once, then dispatched
    assert [a.layout for a in once.signatures[0]] == ["A", "A", "A"]
    # an argument named exact keeps the layout of the first call (an output walked in order)
    kept = jit_module.jit_any_layout("out")(affine)
    for a in views:
        got = np.empty(a.shape)
        kept(a, a, got)
        np.testing.assert_array_equal(got, 2.0 * a + a / 3.0)
    assert [[a.layout for a in sig] for sig in kept.signatures] == [["A", "A", "C"]]
    with pytest.raises(ValueError, match=r"jit_any_layout\(affine\): no argument \['output'\]"):
        jit_module.jit_any_layout("output")(affine)


def test_a_ufunc_is_the_same_mechanism_on_arrays_and_on_scalars() -> None:
    @jit_module.jit
    def scalar_calls(failures, passes, ran, progress, size, prot, use):  # type: ignore[no-untyped-def]
        out = np.empty((2, failures.size))
        for i in range(failures.size):
            out[0, i] = kswapd_failures_after(failures[i], passes[i], ran[i], progress[i])
            out[1, i] = reclaim_scan(size[i], prot[i], use[i], 32.0)
        return out

    rng = np.random.default_rng(0)
    f, passes = rng.uniform(0, 20, 64), rng.uniform(0, 5, 64)
    ran, progress = rng.random(64) < 0.5, rng.random(64) < 0.3
    size, prot, use = rng.uniform(0, 1e6, 64), rng.uniform(0, 1e6, 64), rng.uniform(0, 1e6, 64)
    got = scalar_calls(f, passes, ran, progress, size, prot, use)
    np.testing.assert_array_equal(got[0], kswapd_failures_after(f, passes, ran, progress))
    np.testing.assert_array_equal(got[1], memcg_reclaim_scan(size, prot, use))
    assert (got[0][progress] == 0.0).all()  # reclaim succeeded: the count resets
    assert (got[0][ran & ~progress] <= 16.0).all()  # kswapd gives up at MAX_RECLAIM_RETRIES
    np.testing.assert_array_equal(got[0][~ran & ~progress], f[~ran & ~progress])


def test_the_scalar_helpers_have_numpys_semantics() -> None:
    """np_maximum, np_minimum, np_clip and np_mod in compiled code give numpy's results to
    the bit, signed zeros, infinities and NaN included (np_clip: numpy's with scalar bounds;
    with array bounds numpy's vector loop turns a -0.0 at a bound of 0 into 0.0)."""
    from numba import njit

    from envs.jit import np_clip, np_maximum, np_minimum, np_mod

    @njit
    def each(a, b, out):  # pragma: no cover (compiled)
        for i in range(a.size):
            out[0, i] = np_maximum(a[i], b[i])
            out[1, i] = np_minimum(a[i], b[i])
            out[2, i] = np_mod(a[i], b[i])
            out[3, i] = np_clip(a[i], 0.0, 2.0)

    special = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 6.0, -6.0, 1e-300, np.inf, -np.inf, np.nan]
    values = np.concatenate([special, np.random.default_rng(0).normal(0.0, 10.0, 64)])
    a, b = (x.ravel() for x in np.meshgrid(values, values))
    out = np.empty((4, a.size))
    with np.errstate(all="ignore"):
        each(a, b, out)
        want = [np.maximum(a, b), np.minimum(a, b), np.mod(a, b), np.clip(a, 0.0, 2.0)]
    for name, got, ref in zip(("maximum", "minimum", "mod", "clip"), out, want, strict=True):
        same = (got.view(np.uint64) == ref.view(np.uint64)) | (np.isnan(got) & np.isnan(ref))
        assert same.all(), (name, a[~same][:5], b[~same][:5])


@pytest.mark.parametrize("first", ["python", "compiled"])
def test_a_ufunc_compiles_its_declared_loops_on_first_use_and_no_other(first: str) -> None:
    # nothing is compiled or loaded at import; the first call, from Python or from compiled
    # code, makes the declared loops, and numpy's casting serves other types with them
    @jit_module.ufunc("float64(float64, float64)")
    def scaled(x, k):  # type: ignore[no-untyped-def]  # pragma: no cover (compiled)
        return x * k + 0.25

    @jit_module.jit
    def on_scalars(a, k):  # type: ignore[no-untyped-def]  # pragma: no cover (compiled)
        out = np.empty(a.shape[0])
        for i in range(a.shape[0]):
            out[i] = scaled(a[i], k)
        return out

    assert scaled.ufunc.ntypes == 0 and not scaled._frozen
    x = np.array([1.0, -2.0, 3.5])
    if first == "python":
        np.testing.assert_array_equal(scaled(x, 2.0), x * 2.0 + 0.25)
    else:
        np.testing.assert_array_equal(on_scalars(x, 2.0), x * 2.0 + 0.25)
    assert scaled._frozen and scaled.ufunc.types == ["dd->d"]
    ints = scaled(np.array([1, 2]), 3)  # int64: the float64 loop, cast as numpy casts
    assert ints.dtype == np.float64 and ints.tolist() == [3.25, 6.25]
    np.testing.assert_array_equal(on_scalars(x, 2.0), scaled(x, 2.0))
    assert scaled.ufunc.types == ["dd->d"]


def test_a_ufunc_pickled_before_its_first_use_has_its_declared_loops() -> None:
    import pickle

    @jit_module.ufunc("boolean(float64)")
    def hopeless(failures):  # type: ignore[no-untyped-def]  # pragma: no cover (compiled)
        return failures >= 16.0

    assert not hopeless._frozen  # not used yet
    copy = pickle.loads(pickle.dumps(hopeless))  # numba rebuilds a ufunc by value
    assert copy._frozen and copy.ufunc.types == ["d->?"]
    assert copy(np.array([15.0, 16.0])).tolist() == [False, True]
    assert copy(np.array([15, 16])).dtype == np.bool_  # ints cast to the declared loop


def test_a_ufuncs_cache_is_keyed_on_every_compiled_module(monkeypatch: pytest.MonkeyPatch) -> None:
    # a ufunc inlines helpers of other modules too (np_clip, ...): numba keys its cache on
    # its own module, so envs.jit gives it the stamp of the jit kernels
    from envs.kernel import kswapd_failures_after

    locator = kswapd_failures_after._dispatcher.cache._impl.locator
    assert type(locator) in (jit_module._Locator, jit_module._UserLocator)
    assert locator.get_source_stamp() == jit_module._sources_stamp()

    made = []  # the array forms of inline functions go through the same path
    vectorize = jit_module._vectorize

    def spy(signatures: tuple[str, ...], f: object, **kws: Any) -> object:
        made.append(vectorize(signatures, f, **kws))
        return made[-1]

    monkeypatch.setattr(jit_module, "_vectorize", spy)

    @jit_module.inline
    def halve(x):  # type: ignore[no-untyped-def]  # pragma: no cover (compiled)
        return 0.5 * x

    halves = jit_module.array_form("float64(float64)", halve)
    np.testing.assert_array_equal(halves(np.array([2.0, -0.0])), [1.0, -0.0])
    assert len(made) == 1
    assert made[0]._dispatcher.cache._impl.locator.get_source_stamp() == jit_module._sources_stamp()


_RACE_MODULE = """
import numpy as np
from envs.jit import jit


@jit
def busy(x):
    # enough code that its compile takes a while: both processes miss at the same moment
    out = np.zeros_like(x)
    for i in range(x.size):
        v = x[i]
        for k in range(8):
            v = np.sin(v) * np.cos(v) + np.tanh(v) - np.exp(-v * v) + np.log1p(v * v)
        out[i] = v
    return out
"""


def _race(folder: str, barrier: Any, out: Any) -> None:  # a spawned process
    import sys

    sys.path.insert(0, folder)
    import race_module

    barrier.wait()
    race_module.busy(np.ones(3))
    out.put(sum(race_module.busy.stats.cache_misses.values()))


def test_processes_that_start_together_compile_a_function_once(tmp_path: Path) -> None:
    # two processes that miss the same function at the same moment: one compiles it and
    # saves it, the other waits for the function's lock and loads what the first saved
    (tmp_path / "race_module.py").write_text(_RACE_MODULE)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    misses = sorted(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert misses == [0, 1]
    assert list((tmp_path / "__pycache__").glob("race_module.busy-*.nbc"))


def test_a_failed_compile_lets_go_of_the_lock() -> None:
    def bad(x: np.ndarray) -> float:
        return x.no_such_attribute  # type: ignore[attr-defined,no-any-return]

    compiled = jit_module.jit(bad)
    with pytest.raises(Exception, match="no_such_attribute"):
        compiled(np.ones(2))
    assert compiled._cache._lockfile is None


def test_the_solver_kernel_is_compiled_ahead_with_the_steps_signature() -> None:
    # compile_kernel (the test suite's first worker calls it first) compiles the signature
    # an environment's step uses: a step after it compiles nothing more
    import gymnasium as gym
    import numba

    import envs
    from envs.solver import _evaluate, _jacobian, _solve_batch, compile_evaluation, compile_kernel

    compile_kernel()
    env = gym.make(envs.ENV_ID, scenario="mixed")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    assert len(_solve_batch.signatures) == 1
    # the evaluation and the Jacobian it calls, once each (not also for literal False flags,
    # which numba compiled on its way to their type), and the tests' evaluation shares them:
    # the cache's index lists every signature compiled for this code (a process that loads
    # the kernel from the cache compiles neither function itself)
    compile_evaluation()
    for called in (_evaluate, _jacobian):
        sigs = [key[0] for key in called._cache._cache_file._load_index()]
        assert len(sigs) == 1, (called, sigs)
        assert not [t for t in sigs[0] if isinstance(t, numba.types.Literal)], (called, sigs)


def _compiled() -> dict[str, set[str]]:
    import numba

    got = {}
    for name in jit_module.COMPILED:
        module = importlib.import_module(f"envs.{name[:-3]}")
        for attr, obj in vars(module).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher):
                got[f"{name}:{attr}"] = {str(s) for s in obj.signatures}
    return got


def _signatures(stand_in: bool, out: Any) -> None:  # a spawned process
    import envs.warm

    envs.warm.compile_kernel()  # and what it calls: not the rest's
    before = _compiled()
    (envs.warm.compile_rest if stand_in else envs.warm.environment_steps)()
    out.put({k: sorted(v - before[k]) for k, v in _compiled().items() if v - before[k]})


@pytest.mark.slow  # two spawned processes, each loading or compiling the whole model (about 11 s)
def test_compile_rest_compiles_the_signatures_of_real_steps() -> None:
    # the kernel stood in for by constants changes values, not types: the rest of the model
    # is compiled for exactly the signatures the same steps compile with the real kernel
    ctx = mp.get_context("spawn")
    got = []
    for stand_in in (True, False):
        out = ctx.Queue()
        p = ctx.Process(target=_signatures, args=(stand_in, out))
        p.start()
        got.append(out.get(timeout=600))
        p.join(timeout=60)
    rest, real = got
    assert len(real) > 10  # the environment's other compiled functions
    assert rest == real
