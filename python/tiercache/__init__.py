"""tiercache from Python: the simulator, trace I/O, sweeps (on this machine or a Ray cluster)
and the engine.

Every function runs the code the ``tiercache`` command runs, with the same options and the
same error messages::

    import tiercache
    report = tiercache.sim("data/cloudPhysicsIO.oracleGeneral.bin", policy="lru", capacity="64MiB")
    report["hit_ratio"]
    frame = tiercache.sweep(["a.bin", "b.bin"], policies=["lru", "arc"], capacities=["64MiB", "1GiB"])

Options are ``sim``'s, with underscores: the stack (``lower_capacity``, ``placement``, ``mode``,
``nvcache``, ``nhc``, ``admission``, ``seed``...), the trace (``block_size``, ``csv_spec``,
``skip_bad``) and virtual time (``clients``, ``arrival_rate``, ``profile``,
``backing_profile``...). A whole stack can be given as ``stack=``, a dict in the schema of an
experiment file's ``[cache]`` table.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _tiercache
from ._tiercache import ConfigError, TiercacheError, TraceError

__all__ = [
    "sim",
    "sweep",
    "mrc",
    "read_trace",
    "write_trace",
    "Trace",
    "Cache",
    "TiercacheError",
    "TraceError",
    "ConfigError",
    "OPS",
]

__version__ = "0.1.0"

PathLike = Union[str, "os.PathLike[str]"]
Amount = Union[str, int]

#: Operation codes of :class:`Trace` ``op`` arrays.
OPS = {"read": 0, "write": 1, "delete": 2, "lookup": 3}

#: Columns that measure the run itself (wall-clock time), not the cache: they differ between
#: two runs of the same cell.
TIMING_COLUMNS = ("elapsed_seconds", "requests_per_second")


def _plain(value: Any) -> Any:
    """Options as JSON: paths become strings, tuples lists, numpy scalars Python numbers."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _options(
    policy: Optional[str],
    capacity: Optional[Amount],
    stack: Optional[Dict[str, Any]],
    options: Dict[str, Any],
) -> Dict[str, Any]:
    merged: Dict[str, Any] = dict(stack or {})
    if policy is not None:
        merged["policy"] = policy
    if capacity is not None:
        merged["capacity"] = capacity
    for key, value in options.items():
        if key in merged and stack and key in stack:
            raise ConfigError(f"'{key}' is given both in stack= and as an option")
        merged[key] = value
    for key in ("policy", "capacity"):
        if key not in merged:
            raise ConfigError(f"'{key}' is missing: give {key}= or a stack with it")
    return {k: _plain(v) for k, v in merged.items() if v is not None}


def sim(
    trace: PathLike,
    *,
    policy: Optional[str] = None,
    capacity: Optional[Amount] = None,
    unit: str = "bytes",
    format: str = "auto",
    stack: Optional[Dict[str, Any]] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Simulates one policy stack over a trace; returns what ``tiercache sim --json`` prints.

    ``policy`` and ``capacity`` are the top tier's (``"lru"``, ``"64MiB"`` or, with
    ``unit="objects"``, a count). ``options`` are ``sim``'s options with underscores
    (``lower_capacity="1GiB"``, ``mode="wb"``, ``block_size="4KiB"``, ``clients=16`` for
    virtual time...). Raises :class:`TraceError` for a trace that cannot be read and
    :class:`ConfigError` for an option that is not valid, with the CLI's messages. The
    simulation runs without the GIL, so threads run simulations in parallel.
    """
    merged = _options(policy, capacity, stack, {"unit": unit, "format": format, **options})
    report = _tiercache.sim_json(os.fspath(trace), json.dumps(merged))
    return json.loads(report)


def _flat(report: Dict[str, Any]) -> Dict[str, Any]:
    """A report as one row, as ``sweep.csv`` has it: nested objects become ``key_subkey``
    columns, lists are left out."""
    row: Dict[str, Any] = {}
    for key, value in report.items():
        if isinstance(value, dict):
            for sub, x in value.items():
                row[f"{key}_{sub}"] = x
        elif not isinstance(value, list):
            row[key] = value
    return row


def _cell(trace: str, policy: str, capacity: Amount, options: Dict[str, Any]) -> Dict[str, Any]:
    return _flat(sim(trace, policy=policy, capacity=capacity, **options))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _interactive() -> bool:
    """Whether a person watches: stderr is a terminal, or this runs in a notebook."""
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return "ipykernel" in sys.modules


def _progress(total: int, show: bool):
    """A progress bar when asked for and someone watches (a terminal or a notebook); never
    drawn into a log or a pipe."""
    if not show or not _interactive():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the package depends on tqdm; a stripped environment may lack it
        return None
    return tqdm(total=total, desc="tiercache sweep", unit="cell")


def sweep(
    traces: Union[PathLike, Sequence[PathLike]],
    *,
    policies: Sequence[str],
    capacities: Sequence[Amount],
    unit: str = "bytes",
    format: str = "auto",
    backend: str = "local",
    workers: Optional[int] = None,
    retries: int = 1,
    progress: bool = True,
    **options: Any,
):
    """Runs every (trace, policy, capacity) cell; returns a pandas DataFrame, one row per cell
    in that order, with the columns of ``tiercache sweep``'s ``sweep.csv`` (``trace``,
    ``policy``, ``capacity``, ``hit_ratio``, ``byte_hit_ratio``...) and ``error``.

    ``backend="local"`` reads each trace once and runs its cells on this machine's cores
    (``workers`` threads, all cores by default); ``backend="ray"`` runs each cell as a Ray task on the cluster ``ray.init()``
    connected to (or a local one), so the traces must be at paths every node sees. Cells start
    largest trace first. A cell that fails is retried ``retries`` times, then reported in the
    ``error`` column (its other columns empty) instead of stopping the sweep. ``options`` are
    :func:`sim`'s. The columns in ``TIMING_COLUMNS`` time the run itself; the others are the
    same from either backend.
    """
    import pandas as pd

    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    trace_list = [os.fspath(t) for t in traces]
    if not trace_list or not policies or not capacities:
        raise ConfigError("sweep needs at least one trace, one policy and one capacity")
    if retries < 0:
        raise ConfigError(f"retries must be at least 0, got {retries}")
    cell_options = {"unit": unit, "format": format, **options}
    cells = [(t, p, c) for t in trace_list for p in policies for c in capacities]
    order = sorted(range(len(cells)), key=lambda i: -_size(cells[i][0]))
    if backend == "local":
        rows = _sweep_local(cells, order, cell_options, workers, retries, progress)
    elif backend == "ray":
        rows = _sweep_ray(cells, order, cell_options, retries, progress)
    else:
        raise ConfigError(f"backend '{backend}': use local or ray")
    frame = pd.DataFrame(rows)
    first = ["trace", "policy", "capacity"]
    rest = [c for c in frame.columns if c not in first and c != "error"]
    return frame[first + rest + ["error"]]


def mrc(
    trace: PathLike,
    *,
    policies: Sequence[str],
    capacities: Sequence[Amount],
    unit: str = "bytes",
    rate: float = 0.01,
    sample_keys: Optional[int] = None,
    samples: int = 3,
    sample_lru: bool = False,
    seed: int = 0,
    format: str = "auto",
    estimator: str = "stratified",
    min_sampled_objects: Optional[int] = None,
):
    """Miss-ratio curves at a fraction of :func:`sweep`'s cost, as ``tiercache mrc`` makes them;
    returns a pandas DataFrame, one row per (policy, capacity) in that order, with the columns
    of ``mrc.csv``: ``policy``, ``capacity``, ``unit``, ``miss_ratio``, ``byte_miss_ratio``,
    ``method``, ``rate``, ``simulated_requests``, ``spread``, ``samples`` and ``estimator``.

    LRU's curve is exact, from stack distances in one pass (``method`` ``"exact"``), unless
    ``sample_lru``; every other policy's is simulated on a sample of the keys (SHARDS): those
    whose hash falls in a ``rate`` fraction of the hash space, or at most ``sample_keys`` keys,
    over ``rate`` times each capacity. Each point is the mean over ``samples`` independent
    samples and ``spread`` the range of their miss ratios. A sample's miss ratio is
    post-stratified (``estimator="stratified"``): its hit ratio per class of keys by request
    count, weighted by each class's share of the whole trace; ``"plain"`` takes its misses over
    its requests, as SHARDS does. With ``min_sampled_objects``, a size whose sampled cache would
    hold fewer objects than that is sampled at the rate that gives it that many (the whole trace
    from a rate of 0.5 up). The work runs without the GIL.
    """
    import pandas as pd

    if not policies or not capacities:
        raise ConfigError("mrc needs at least one policy and one capacity")
    points = _tiercache.mrc_json(
        os.fspath(trace),
        format,
        [str(p) for p in policies],
        [str(c) for c in capacities],
        unit,
        float(rate),
        sample_keys,
        int(samples),
        bool(sample_lru),
        int(seed),
        str(estimator),
        None if min_sampled_objects is None else int(min_sampled_objects),
    )
    return pd.DataFrame(json.loads(points))


def _failed(cell, error: BaseException) -> Dict[str, Any]:
    trace, policy, capacity = cell
    return {"trace": trace, "policy": policy, "capacity": capacity, "error": str(error)}


def _sweep_local(cells, order, options, workers, retries, show) -> List[Dict[str, Any]]:
    """Each trace is read once and its cells run on every core (``workers`` threads), the
    largest trace first; a cell that fails is run again on its own, ``retries`` times."""
    rows: List[Optional[Dict[str, Any]]] = [None] * len(cells)
    bar = _progress(len(cells), show)
    tick = (lambda: bar.update(1)) if bar is not None else None
    common = json.dumps({k: _plain(v) for k, v in options.items() if v is not None})
    traces: List[str] = []
    for i in order:
        if cells[i][0] not in traces:
            traces.append(cells[i][0])
    for trace in traces:
        mine = [i for i in range(len(cells)) if cells[i][0] == trace]
        own = json.dumps([{"policy": cells[i][1], "capacity": _plain(cells[i][2])} for i in mine])
        try:
            results = json.loads(_tiercache.sweep_json(trace, common, own, workers or 0, tick))
        except TiercacheError as error:  # the trace itself: every cell of it fails alike
            results = [{"error": str(error)} for _ in mine]
            if tick is not None:
                for _ in mine:
                    tick()
        for i, result in zip(mine, results):
            if "report" in result:
                rows[i] = {**_flat(result["report"]), "error": None}
                continue
            rows[i] = _failed(cells[i], result["error"])
            for _ in range(retries):
                try:
                    rows[i] = {**_cell(*cells[i], options), "error": None}
                    break
                except Exception as error:  # reported in the row after the last attempt
                    rows[i] = _failed(cells[i], error)
    if bar is not None:
        bar.close()
    return [r for r in rows if r is not None]


def _sweep_ray(cells, order, options, retries, show) -> List[Dict[str, Any]]:
    try:
        import ray
    except ImportError as error:
        raise ConfigError("backend='ray' needs Ray: pip install 'tiercache[ray]'") from error
    if not ray.is_initialized():
        ray.init()
    remote = ray.remote(_cell).options(max_retries=retries, retry_exceptions=True)
    refs = {remote.remote(*cells[i], options): i for i in order}
    rows: List[Optional[Dict[str, Any]]] = [None] * len(cells)
    bar = _progress(len(cells), show)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            i = refs[ref]
            try:
                row = ray.get(ref)
                row["error"] = None
            except Exception as error:  # a cell that failed every attempt
                cause = getattr(error, "cause", None) or error
                row = _failed(cells[i], cause)
            rows[i] = row
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return [r for r in rows if r is not None]


class Trace(NamedTuple):
    """A trace as numpy arrays: ``time`` (uint64 microseconds), ``key`` (uint64), ``size``
    (uint32 bytes), ``op`` (uint8, codes in :data:`OPS`)."""

    time: np.ndarray
    key: np.ndarray
    size: np.ndarray
    op: np.ndarray


def read_trace(
    path: PathLike,
    format: str = "auto",
    block_size: Optional[Amount] = None,
    limit: Optional[int] = None,
    *,
    csv_spec: Optional[str] = None,
    skip_bad: bool = False,
) -> Trace:
    """Reads a trace of any format ``tiercache`` reads (compressed or not) into numpy arrays.

    ``block_size`` splits byte ranges into aligned blocks, as ``--block-size`` does; ``limit``
    stops after that many requests. Raises :class:`TraceError` naming the file, and for a bad
    record its line or record number.
    """
    bs = None if block_size is None else str(block_size)
    time, key, size, op, _skipped, _format = _tiercache.read_trace(
        os.fspath(path), format, csv_spec, bs, skip_bad, limit
    )
    return Trace(
        np.frombuffer(time, dtype="<u8"),
        np.frombuffer(key, dtype="<u8"),
        np.frombuffer(size, dtype="<u4"),
        np.frombuffer(op, dtype="u1"),
    )


def write_trace(
    path: PathLike,
    key: Iterable[int],
    size: Union[int, Iterable[int]] = 4096,
    time: Optional[Iterable[int]] = None,
    op: Optional[Iterable[int]] = None,
    format: str = "oracle-general",
) -> int:
    """Writes a trace made in numpy, so it can be simulated; returns the number of requests.

    ``format="oracle-general"`` writes libCacheSim's binary format (it keeps no operation: every
    request reads); ``"csv"`` writes tiercache's ``time_us,key,size,op``. ``size`` may be one
    number for every request; ``time`` defaults to the request's index and ``op`` to reads.
    A name ending in .zst or .gz compresses.
    """
    keys = np.ascontiguousarray(np.asarray(key), dtype="<u8")
    n = len(keys)

    def column(values, dtype, default):
        if values is None:
            return np.ascontiguousarray(default, dtype=dtype)
        array = np.asarray(values)
        if array.ndim == 0:
            array = np.full(n, array)
        if len(array) != n:
            raise ConfigError(f"{len(array)} values for {n} keys")
        if array.size and array.min() < 0:
            raise ConfigError("negative values cannot be written")
        return np.ascontiguousarray(array, dtype=dtype)

    sizes = column(size, "<u4", None)
    times = column(time, "<u8", np.arange(n))
    ops = column(op, "u1", np.zeros(n))
    return _tiercache.write_trace(
        os.fspath(path), format, times.tobytes(), keys.tobytes(), sizes.tobytes(), ops.tobytes()
    )


def _temporary(path: str) -> bool:
    """Whether ``path`` lies in a temporary directory: ``/dev/shm`` or the temp dir."""
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    places = {os.path.realpath(tempfile.gettempdir()), "/dev/shm"}
    return any(parent == place or parent.startswith(place + os.sep) for place in places)


def _remove(paths: List[str]) -> None:
    """Removes the tier files a closed cache made in a temporary directory."""
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


class Cache:
    """The engine: DRAM, a mapped slow-memory tier (``slow_path``) and a flash tier
    (``flash_path``), those given, top down, under a policy stack as :func:`sim` takes it.

    The stack's tiers lie on the paths given from the bottom up, with DRAM on top when the
    stack has a tier more: ``lower_capacity`` alone puts DRAM of ``capacity`` over the slow or
    flash tier; ``lower_capacity`` and ``tier=["1GiB"]`` put DRAM over the slow tier over the
    flash tier. A single tier lives on the path given (or in DRAM). Keys are integers, or with
    ``keys="bytes"`` bytes (stored whole with the value and compared on every read, so keys
    whose hashes collide never see each other's value); values bytes of at most
    ``max_value`` (less a bytes key and 4 bytes): ``block_size`` by default for integer keys,
    64 MiB (or what a shard's largest tier holds, if less) for bytes keys. A value larger than
    a block spans pages, one entry of the policy counted by its size, and is kept (and
    recovered after a crash) only whole. ``stats()["tier_hits"]`` counts reads per tier.
    ``sync_interval`` ("1s" by default, "250ms", or "0" for never) is how often the cache
    syncs its slow and flash tiers on its own: a crash of the machine loses at most that much.

    A tier file this cache made in a temporary directory (``/dev/shm``, where it takes the
    machine's memory, or :func:`tempfile.gettempdir`) is removed when the cache closes
    (:meth:`close`, the end of a ``with`` block, or the cache's last reference going), unless
    ``keep_files=True``: kept, it brings the cache back warm the next time. A file that was there
    before, or made anywhere else, is always kept.
    """

    def __init__(
        self,
        *,
        policy: Optional[str] = "lru",
        capacity: Optional[Amount] = None,
        block_size: Amount = "4KiB",
        slow_path: Optional[PathLike] = None,
        flash_path: Optional[PathLike] = None,
        shards: int = 16,
        stack: Optional[Dict[str, Any]] = None,
        keys: str = "int",
        max_value: Optional[Amount] = None,
        sync_interval: Optional[str] = None,
        keep_files: bool = False,
        **options: Any,
    ) -> None:
        if stack and "policy" in stack:
            policy = None
        paths = [os.fspath(p) for p in (slow_path, flash_path) if p is not None]
        made = [p for p in paths if not os.path.exists(p) and _temporary(p)]
        merged = _options(policy, capacity, stack, options)
        self._cache = _tiercache.Cache(
            json.dumps(merged),
            str(block_size),
            None if slow_path is None else os.fspath(slow_path),
            None if flash_path is None else os.fspath(flash_path),
            shards,
            keys,
            None if max_value is None else str(max_value),
            sync_interval,
        )
        self._closed = weakref.finalize(self, _remove, [] if keep_files else made)

    def close(self) -> None:
        """Stops the cache cleanly (its tiers synced and marked clean), then removes the tier
        files it made in a temporary directory unless it was asked to keep them. Using the
        cache after this raises ``ValueError``."""
        self.__dict__.pop("_cache", None)  # the last reference: the engine stops here
        self._closed()

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Reached only for what the instance lacks: `_cache` after close.
        if name == "_cache":
            raise ValueError("the cache is closed")
        raise AttributeError(name)

    @property
    def block_size(self) -> int:
        """The block (a page of the tiers), in bytes."""
        return self._cache.block_size

    @property
    def max_value(self) -> int:
        """The largest value, in bytes (a bytes key and its 4-byte length included)."""
        return self._cache.max_value

    def get(self, key: Union[int, bytes]) -> Optional[bytes]:
        """The value of ``key``, or None on a miss (a miss admits nothing)."""
        return self._cache.get(key)

    def put(self, key: Union[int, bytes], value: bytes) -> bool:
        """Writes ``value`` for ``key``; returns whether the cache holds it now."""
        return self._cache.put(key, value)

    def fetch(self, key: Union[int, bytes], load: Callable[[], bytes]) -> bytes:
        """The value of ``key``: a hit, or ``load()`` called and its bytes cached if the
        policy admits them. Threads that miss one key at once call one ``load`` between them;
        what ``load`` raises is raised again."""
        return self._cache.fetch(key, load)

    def delete(self, key: Union[int, bytes]) -> None:
        """Drops ``key`` if it is cached."""
        self._cache.delete(key)

    def stats(self) -> Dict[str, Any]:
        """The engine's counters (hits, misses, insertions, evictions, bytes per tier...)."""
        return json.loads(self._cache.stats_json())
