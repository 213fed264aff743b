"""The decorators of TierGym's compiled code (numba), and the cache they share.

``jit`` compiles a function once and keeps it on disk beside its module
(``__pycache__``, or numba's user-wide cache where that is not writable); ``inline``
is for the helpers that are inlined where they are called; ``ufunc`` makes a scalar function a numpy ufunc that compiled code calls on
scalars and Python calls on arrays, so that a mechanism is written once for both.
``parallel_jit`` is ``jit`` with numba's threads, which :func:`set_threads` opts into.
All use numpy's error model: ``x / 0`` is ``inf``, and no division is checked (a
check would stop a loop from vectorising).

numba keys a cached function on its own module's source, not on the functions it
calls in other modules: a kernel of :mod:`envs.promotion` or :mod:`envs.reclaim` that
inlines a helper of :mod:`envs.kernel` would keep the helper's old code after an
edit of that file. The cache here (the kernels' and the ufuncs') is keyed on the
contents of every module listed in ``COMPILED`` instead, so an edit of any of them
compiles all of them afresh.

Processes that share a cache compile each signature once between them: on a miss a
process takes the function's file lock (``flock``) and looks again, and compiles only
if no other process saved that signature meanwhile (the test suite's workers and the
labelling workers of :mod:`agents.imitation` start together; :mod:`envs.warm` gives
them different halves of the compile to start with).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import njit, vectorize
from numba.core import sigutils
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    InTreeCacheLocator,
    UserWideCacheLocator,
)

#: the modules that hold compiled code (file names in this package)
COMPILED = (
    "jit.py",
    "kernel.py",
    "solver.py",
    "allocation.py",
    "gather.py",
    "placement.py",
    "promotion.py",
    "reclaim.py",
    "encoding.py",
    "rng.py",
    "hardware.py",
    "interval.py",
)


@functools.cache
def _sources_stamp() -> bytes:
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in COMPILED:
        digest.update(name.encode())
        digest.update((here / name).read_bytes())
    return digest.digest()


class _Locator(InTreeCacheLocator):
    """numba's in-tree cache (``__pycache__``), stamped with every compiled module."""

    def get_source_stamp(self) -> bytes:
        return _sources_stamp()


class _UserLocator(UserWideCacheLocator):
    """numba's user-wide cache, where the package's own directory is not writable."""

    def get_source_stamp(self) -> bytes:
        return _sources_stamp()


class _Impl(CompileResultCacheImpl):
    _locator_classes = [_Locator, _UserLocator]  # noqa: RUF012 (numba's own attribute)


try:  # POSIX; elsewhere each process compiles what it misses, as numba's own cache does
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]

#: Seconds a process waits for another's compile of the same function before compiling it
#: itself (the longest compile, the solver's kernel, takes about a minute on one core).
COMPILE_WAIT_S = 300.0


class _Cache(FunctionCache):
    """numba's function cache, each function compiled by one process at a time across
    the processes that share the cache: on a miss the process takes the function's file
    lock and looks again; it compiles only if no other process saved that signature
    meanwhile, and lets go once it has saved it (or its compile failed). One lock per
    function, not per signature: numba numbers a function's data files from its index,
    and two processes saving two signatures of it at once could both take a number."""

    _impl_class = _Impl

    def __init__(self, py_func: Callable[..., Any]) -> None:
        super().__init__(py_func)
        self._lockfile: Any = None  # open and locked while this process compiles

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        got = super().load_overload(sig, target_context)
        if got is not None or self._lockfile is not None or fcntl is None:
            return got
        self._lockfile = _lock(Path(self._cache_path) / f"{self._impl.filename_base}.lock")
        if self._lockfile is None:
            return None
        got = super().load_overload(sig, target_context)  # saved while this one waited
        if got is not None:
            self.release()
        return got

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            super().save_overload(sig, data)
        finally:
            self.release()

    def release(self) -> None:
        """Let go of the function's lock, if this process holds it."""
        if self._lockfile is not None:
            self._lockfile.close()
            self._lockfile = None


def _lock(path: Path) -> Any:
    """``path`` opened and locked (exclusive ``flock``), waiting at most
    :data:`COMPILE_WAIT_S`; None where it cannot be (a file system without locks, or the
    wait ran out), and the caller then compiles without it."""
    try:
        f = open(path, "a")  # held open until the compile is saved
    except OSError:
        return None
    deadline = time.monotonic() + COMPILE_WAIT_S
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() > deadline:
                f.close()
                return None
            time.sleep(0.05)
        except OSError:
            f.close()
            return None


def _keyed(dispatcher: Any) -> Any:
    """``dispatcher`` with its on-disk cache keyed on every compiled module."""
    with contextlib.suppress(RuntimeError):  # nowhere to write a cache: compiled per process
        cache = dispatcher._cache = _Cache(dispatcher.py_func)
        compile_sig = dispatcher.compile

        def compile_released(sig: Any) -> Any:  # the lock is let go even if the compile fails
            try:
                return compile_sig(sig)
            finally:
                cache.release()

        dispatcher.compile = compile_released
    return dispatcher


def jit(f: Callable[..., Any]) -> Any:
    """``f`` compiled on first use (per argument types) and cached on disk."""
    return _keyed(njit(error_model="numpy")(f))


def _any_layout(t: Any) -> Any:
    return t.copy(layout="A") if isinstance(t, numba.types.Array) else t


def jit_any_layout(*exact: str) -> Callable[[Callable[..., Any]], Any]:
    """:func:`jit`, compiled once per argument dtypes whatever the layouts of the arrays
    (those named in ``exact`` keep the layout the first call gives them).

    numba compiles a function again for every layout of its arrays (C-contiguous,
    Fortran-contiguous, any): a batch-first view of batch-last arrays is Fortran-ordered
    for a batch, C-ordered for one instance, and a row selection is neither, so a
    function that takes a dozen such views compiled up to 15 times (2-3 s each). Here
    a miss compiles (or loads) the signature with every array's layout "any" and
    registers the exact types of the call as a fast-path entry to it, so the next call
    with them dispatches as directly as a compiled signature. The code indexes through
    strides (the same arithmetic: the same numbers); an array the function walks
    through in order, such as an output it allocates C-ordered, is best named in
    ``exact`` (its loops then vectorise). For functions called from Python; compiled
    callers type against the general signatures."""

    def deco(f: Callable[..., Any]) -> Any:
        dispatcher = jit(f)
        compile_exact = dispatcher.compile
        names = list(inspect.signature(f).parameters)
        unknown = set(exact) - set(names)
        if unknown:
            raise ValueError(f"jit_any_layout({f.__name__}): no argument {sorted(unknown)}")
        keep = [name in exact for name in names]

        def compile_any(sig: Any) -> Any:
            args, _ = sigutils.normalize_signature(sig)
            general = tuple(a if k else _any_layout(a) for a, k in zip(args, keep, strict=True))
            entry = compile_exact(general)
            if general != tuple(args):  # the call's own types: straight to the general code
                dispatcher._insert([a._code for a in args], entry)
            return entry

        dispatcher.compile = compile_any
        return dispatcher

    return deco


def parallel_jit(f: Callable[..., Any]) -> Any:
    """``f`` compiled with numba's ``parallel=True`` (its ``prange`` loops run on
    numba's threads) on first use, and cached on disk as :func:`jit`'s."""
    return _keyed(njit(parallel=True, error_model="numpy")(f))


#: the environment variable of :func:`set_threads`' default
THREADS_VAR = "TIERGYM_THREADS"


def _parse_threads(value: str | int, source: str) -> int:
    most = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    if isinstance(value, str) and value.strip().lower() == "auto":
        return most
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if not 1 <= n <= most:
        raise ValueError(
            f"{source}={value!r}: expected a whole number from 1 to {most} (numba's "
            "NUMBA_NUM_THREADS, this machine's cores unless set) or 'auto'"
        )
    return n


_threads: list[int] = [1]
_threads_error: list[ValueError] = []  # a bad TIERGYM_THREADS: raised by get_threads
try:
    _threads[0] = _parse_threads(os.environ.get(THREADS_VAR, "1") or "1", THREADS_VAR)
except ValueError as _exc:  # not at import: the scripts report it as one line, exit 2
    _threads_error.append(_exc)


def set_threads(n: int | str) -> None:
    """How many threads the fixed point of a large batch may use (default: the
    environment variable ``TIERGYM_THREADS``, else 1; ``"auto"``: numba's thread count).
    Only batches of at least 128 elements a thread are split, and every element's
    numbers are the same on any number of threads; the other phases run on one."""
    _threads[0] = _parse_threads(n, "threads")
    _threads_error.clear()


def get_threads() -> int:
    """The thread count :func:`set_threads` set, or ``TIERGYM_THREADS``'s (a bad value
    of it raises ``ValueError`` naming it, here: the scripts call this before any work)."""
    if _threads_error:
        raise _threads_error[0]
    return _threads[0]


_pool_pid: list[int] = []  # the process whose numba threads have run


def may_thread() -> bool:
    """Whether this process may run numba's threads now: not in a process forked from
    one whose threads have run (GNU OpenMP, numba's threading layer where TBB is not
    installed, terminates such a child). The callers then run on one thread: the
    numbers are the same."""
    if not _pool_pid:
        _pool_pid.append(os.getpid())
    return _pool_pid[0] == os.getpid()


def inline(f: Callable[..., Any]) -> Any:
    """``f`` inlined into the compiled functions that call it (not callable alone cheaply)."""
    return njit(inline="always", error_model="numpy")(f)


def array_form(signature: str, scalar: Any) -> Callable[..., Any]:
    """The numpy ufunc of an :func:`inline` scalar function, for Python's callers on
    arrays (compiled code inlines ``scalar`` itself), made on its first call.

    A ufunc compiled or loaded from the cache costs about 60 ms; made at import, every
    process would pay it for each, used or not. The call goes to the numpy ufunc
    itself, not numba's Python wrapper around it (about 2 us less a call).
    """
    made: list[Any] = []

    def call(*args: Any) -> Any:
        if not made:
            made.append(_vectorize((signature,), scalar.py_func, on_first_use=False).ufunc)
        return made[0](*args)

    call.__doc__ = scalar.__doc__
    call.__name__ = scalar.__name__
    return call


def ufunc(*signatures: str) -> Callable[[Callable[..., Any]], Any]:
    """A numpy ufunc of the scalar function it decorates, compiled for ``signatures`` (on
    its first use, from Python or from compiled code; loops for other types are never
    compiled: numpy's casting picks one of these).

    Compiled code calls it on scalars; Python calls it on arrays and scalars (with
    numpy's broadcasting) and gets arrays, or numpy scalars for scalar arguments.
    """

    def deco(f: Callable[..., Any]) -> Any:
        return _vectorize(signatures, f)

    return deco


def _vectorize(
    signatures: tuple[str, ...], f: Callable[..., Any], on_first_use: bool = True
) -> Any:
    """numba's ``vectorize(signatures, cache=True)(f)`` (ufuncs have numpy's error model)
    with the cache keyed as :func:`jit`'s: numba keys a ufunc's on its own module, so one
    that inlines a helper of another module (``np_clip`` ...) would keep the helper's old
    code after an edit of it. ``on_first_use``: the loops are compiled or loaded when a call
    first needs one, else now."""
    made = vectorize(cache=True)(f)  # no signature yet: nothing compiled or loaded
    with contextlib.suppress(RuntimeError):  # nowhere to write a cache: compiled per process
        made._dispatcher.cache = _Cache(made._dispatcher.py_func)
    compile_loop = made._compile_for_argtys  # numba's own (the instance's are replaced below)

    def first_use(*_args: Any, **_kws: Any) -> bool:
        """The declared loops, compiled or loaded, then no other: what numba asks for when a
        call finds no loop, from Python (``_compile_for_args``, then the call again) or from
        compiled code (``_compile_for_argtys``, then numpy's rule picks the loop)."""
        if not made._frozen:
            for sig in signatures:
                compile_loop(*sigutils.normalize_signature(sig))
            made.disable_compile()
        return True

    if not on_first_use:  # now (the caller reads the numpy ufunc's loops itself)
        first_use()
        return made
    # made on first use, not at import: each loop loaded from the cache costs 60-110 ms, and a
    # process whose kernels all come from the cache may never call a ufunc from Python
    made._compile_for_args = first_use
    made._compile_for_argtys = first_use
    reduce_states = made._reduce_states  # a copy pickled (numba's own rebuild) has the loops

    def loops_then_states() -> Any:
        first_use()
        return reduce_states()

    made._reduce_states = loops_then_states
    return made


@inline
def np_maximum(a: float, b: float) -> float:  # pragma: no cover (compiled)
    """``np.maximum`` of two scalars: NaN if either is NaN (Python's ``max`` is not), ``b``
    where they are equal (numpy's choice between ``-0.0`` and ``0.0``)."""
    return a if (a > b or a != a) else b


@inline
def np_minimum(a: float, b: float) -> float:  # pragma: no cover (compiled)
    """``np.minimum`` of two scalars: NaN if either is NaN."""
    return a if (a < b or a != a) else b


@inline
def np_mod(a: float, b: float) -> float:  # pragma: no cover (compiled)
    """``np.mod`` of two floats (numpy's ``npy_divmod``): ``fmod`` with the sign of ``b``, a
    zero remainder signed as ``b``, and ``fmod``'s NaN for ``b == 0``."""
    m = np.fmod(a, b)
    if b == 0.0:
        return m
    if m != 0.0:
        if (b < 0.0) != (m < 0.0):
            m = m + b
    else:
        m = np.copysign(0.0, b)
    return m


@inline
def np_clip(x: float, lo: float, hi: float) -> float:  # pragma: no cover (compiled)
    """``np.clip`` of a scalar: NaN stays NaN, and so does a ``-0.0`` at a bound of 0."""
    return lo if x < lo else (hi if x > hi else x)
