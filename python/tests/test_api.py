"""The Python package against the command line, the peer simulator and itself.

Run by scripts/test after `pip install .` and `cargo test` (which builds the `tiercache` binary
these tests compare against)."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiercache

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
CLOUD = DATA / "cloudPhysicsIO.oracleGeneral.bin.zst"
MSR = DATA / "msr_hm_0_first1000.csv.zst"


def cli(*args: str) -> str:
    binary = os.environ.get("TIERCACHE_BIN", str(ROOT / "target" / "debug" / "tiercache"))
    assert Path(binary).exists(), f"{binary}: build it first (cargo build -p tiercache-cli)"
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def without_timing(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in tiercache.TIMING_COLUMNS}


def test_sim_gives_what_the_command_line_prints():
    for policy, capacity in [("lru", "4MiB"), ("s3fifo", "16MiB"), ("arc", "1MiB")]:
        ours = tiercache.sim(CLOUD, policy=policy, capacity=capacity)
        theirs = json.loads(
            cli("sim", "--trace", str(CLOUD), "--policy", policy, "--capacity", capacity, "--json")
        )
        assert without_timing(ours) == without_timing(theirs)
    # A two-tier stack in an Open CAS mode, in virtual time, with the CLI's option names.
    options = dict(lower_capacity="8MiB", mode="wb", clients=4, backing_profile="sata-ssd")
    ours = tiercache.sim(MSR, policy="lru", capacity="1MiB", block_size="4KiB", **options)
    theirs = json.loads(
        cli(
            "sim", "--trace", str(MSR), "--policy", "lru", "--capacity", "1MiB",
            "--block-size", "4KiB", "--lower-capacity", "8MiB", "--mode", "wb",
            "--clients", "4", "--backing-profile", "sata-ssd", "--json",
        )
    )
    assert ours == theirs
    assert ours["ops_per_second"] > 0


def test_a_stack_dict_is_the_same_as_options():
    stack = {"policy": "lru", "capacity": "2MiB", "lower_capacity": "6MiB", "placement": "scm-first:2"}
    a = tiercache.sim(CLOUD, stack=stack)
    b = tiercache.sim(CLOUD, policy="lru", capacity="2MiB", lower_capacity="6MiB", placement="scm-first:2")
    assert without_timing(a) == without_timing(b)
    assert a["lower_hits"] > 0


def test_lru_agrees_with_libcachesim():
    libcachesim = pytest.importorskip("libcachesim")  # scripts/test installs it
    reader = libcachesim.TraceReader(
        str(CLOUD), trace_type=libcachesim.TraceType.ORACLE_GENERAL_TRACE
    )
    capacity = 8 * 1024 * 1024
    peer = libcachesim.LRU(cache_size=capacity)
    miss_ratio, _ = peer.process_trace(reader)
    ours = tiercache.sim(CLOUD, policy="lru", capacity=capacity)
    assert ours["miss_ratio"] == pytest.approx(miss_ratio, abs=1e-12)


def test_errors_are_exceptions_with_the_command_lines_messages(tmp_path):
    with pytest.raises(tiercache.TraceError, match="no-such.csv: cannot open trace"):
        tiercache.sim(tmp_path / "no-such.csv", policy="lru", capacity="1MiB")
    bad = tmp_path / "bad.csv"
    bad.write_text("time_us,key,size,op\n1,2,3,read\n2,x,3,read\n")
    with pytest.raises(tiercache.TraceError, match=r"bad.csv: line 3: field 'key'"):
        tiercache.sim(bad, policy="lru", capacity="1MiB")
    assert tiercache.sim(bad, policy="lru", capacity="1MiB", skip_bad=True)["skipped_records"] == 1
    with pytest.raises(tiercache.ConfigError, match="unknown policy 'lru2'"):
        tiercache.sim(CLOUD, policy="lru2", capacity="1MiB")
    with pytest.raises(tiercache.ConfigError, match="unknown option 'colour'"):
        tiercache.sim(CLOUD, policy="lru", capacity="1MiB", colour="blue")
    with pytest.raises(tiercache.ConfigError, match="capacity"):
        tiercache.sim(CLOUD, policy="lru", capacity="12 parsecs")
    with pytest.raises(tiercache.ConfigError, match="capacity' is missing"):
        tiercache.sim(CLOUD, policy="lru")
    assert issubclass(tiercache.TraceError, tiercache.TiercacheError)
    assert issubclass(tiercache.ConfigError, tiercache.TiercacheError)


def test_numpy_round_trip_through_write_and_read(tmp_path):
    rng = np.random.default_rng(7)
    n = 5000
    key = rng.zipf(1.2, n).astype(np.uint64) + (1 << 40)
    size = rng.integers(1, 1 << 20, n).astype(np.uint32)
    seconds = np.sort(rng.integers(0, 86_400, n)).astype(np.uint64)
    # oracleGeneral keeps whole seconds and no operation.
    path = tmp_path / "made.oracleGeneral.bin.zst"
    assert tiercache.write_trace(path, key, size, time=seconds * 1_000_000) == n
    trace = tiercache.read_trace(path)
    np.testing.assert_array_equal(trace.key, key)
    np.testing.assert_array_equal(trace.size, size)
    np.testing.assert_array_equal(trace.time, seconds * 1_000_000)
    assert (trace.op == tiercache.OPS["read"]).all()
    # CSV keeps microseconds and operations.
    op = rng.integers(0, 3, n).astype(np.uint8)
    time = np.arange(n, dtype=np.uint64) * 7
    csv = tmp_path / "made.csv"
    tiercache.write_trace(csv, key, size, time=time, op=op, format="csv")
    back = tiercache.read_trace(csv)
    for a, b in zip(back, (time, key, size, op)):
        np.testing.assert_array_equal(a, b)
    # What was written simulates, as the same trace read by the command line does.
    ours = tiercache.sim(path, policy="lru", capacity="64MiB")
    theirs = json.loads(cli("sim", "--trace", str(path), "--policy", "lru", "--capacity", "64MiB", "--json"))
    assert without_timing(ours) == without_timing(theirs)
    with pytest.raises(tiercache.ConfigError, match="4 values for 5000 keys"):
        tiercache.write_trace(csv, key, size=[1, 2, 3, 4])


def test_read_trace_takes_the_block_view_and_a_limit():
    whole = tiercache.read_trace(MSR)
    assert len(whole.key) == 1000
    blocks = tiercache.read_trace(MSR, block_size="4KiB")
    assert len(blocks.key) > 1000 and (blocks.size <= 4096).all()
    assert len(tiercache.read_trace(MSR, limit=10).key) == 10
    assert len(tiercache.read_trace(CLOUD).key) == 113_872


def test_sim_releases_the_gil():
    # While a simulation runs in another thread, this thread keeps running Python: ticks
    # stamped between the call's start and end. Holding the GIL, the call would leave none.
    import time

    window = []
    done = threading.Event()

    def run():
        start = time.perf_counter()
        tiercache.sim(DATA / "arc_P3.lis.zst", policy="arc", capacity=1000, unit="objects")
        window.extend([start, time.perf_counter()])
        done.set()

    ticks = []
    thread = threading.Thread(target=run)
    thread.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
    thread.join()
    start, end = window
    inside = sum(1 for t in ticks if start < t < end)
    assert end - start > 0.05, "the simulation is too short to tell"
    # At this loop's own pace, the window holds (end - start) * rate ticks; a call holding
    # the GIL leaves only those of the switches around it (a C call that holds it, json.loads
    # of a long list, was measured at about 6% of its window).
    rate = len(ticks) / (ticks[-1] - ticks[0])
    assert inside > 0.5 * rate * (end - start), f"{inside} ticks in {end - start:.3f} s"


def test_progress_is_drawn_only_where_someone_watches(monkeypatch):
    class Pipe:
        def isatty(self):
            return False

    class Terminal(Pipe):
        def isatty(self):
            return True

        def write(self, text):
            return len(text)

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stderr", Pipe())
    assert tiercache._progress(3, True) is None
    monkeypatch.setattr(sys, "stderr", Terminal())
    bar = tiercache._progress(3, True)
    assert bar is not None
    bar.close()
    assert tiercache._progress(3, False) is None


def test_sweep_has_the_columns_of_sweep_csv(tmp_path):
    frame = tiercache.sweep(CLOUD, policies=["lru", "fifo"], capacities=["1MiB", "8MiB"], progress=False)
    assert list(frame[["policy", "capacity"]].itertuples(index=False, name=None)) == [
        ("lru", 1 << 20), ("lru", 8 << 20), ("fifo", 1 << 20), ("fifo", 8 << 20)
    ]
    assert frame["error"].isna().all()
    cli("sweep", "--trace", str(CLOUD), "--policy", "lru", "--policy", "fifo",
        "--capacities", "1MiB,8MiB", "--out", str(tmp_path))
    header = (tmp_path / "sweep.csv").read_text().splitlines()[0].split(",")
    assert set(header) <= set(frame.columns)
    rows = [line.split(",") for line in (tmp_path / "sweep.csv").read_text().splitlines()[1:]]
    for row in rows:
        cells = dict(zip(header, row))
        ours = frame[(frame.policy == cells["policy"]) & (frame.capacity == int(cells["capacity"]))]
        assert float(cells["hit_ratio"]) == pytest.approx(ours["hit_ratio"].item(), abs=1e-12)


def test_mrc_gives_the_command_lines_curves(tmp_path):
    frame = tiercache.mrc(CLOUD, policies=["lru", "s3fifo"], capacities=["16MiB", "256MiB"],
                          rate=0.1, samples=2)
    assert list(frame[["policy", "capacity", "method"]].itertuples(index=False, name=None)) == [
        ("lru", 16 << 20, "exact"), ("lru", 256 << 20, "exact"),
        ("s3fifo", 16 << 20, "sampled"), ("s3fifo", 256 << 20, "sampled"),
    ]
    cli("mrc", "--trace", str(CLOUD), "--policy", "lru", "--policy", "s3fifo", "--rate", "0.1",
        "--samples", "2", "--capacities", "16MiB,256MiB", "--out", str(tmp_path))
    lines = (tmp_path / "mrc.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert header == list(frame.columns)
    for line, (_, ours) in zip(lines[1:], frame.iterrows()):
        cells = dict(zip(header, line.split(",")))
        assert float(cells["miss_ratio"]) == pytest.approx(ours["miss_ratio"], abs=1e-12)
        assert float(cells["spread"]) == pytest.approx(ours["spread"], abs=1e-12)
    # LRU's exact curve is the simulator's.
    for _, point in frame[frame.policy == "lru"].iterrows():
        full = tiercache.sim(CLOUD, policy="lru", capacity=int(point.capacity))
        assert point.miss_ratio == pytest.approx(full["miss_ratio"], abs=1e-12)
    with pytest.raises(tiercache.ConfigError, match="rate must be in"):
        tiercache.mrc(CLOUD, policies=["lru"], capacities=["1MiB"], rate=0)
    # A small size's rate raised so that its sampled cache holds 100 objects.
    raised = tiercache.mrc(CLOUD, policies=["s3fifo"], capacities=["4MiB"], min_sampled_objects=100)
    assert raised.loc[0, "rate"] > 0.01 and raised.loc[0, "estimator"] == "stratified"


def test_a_failing_cell_is_reported_not_lost():
    frame = tiercache.sweep(CLOUD, policies=["lru", "nonsense"], capacities=["1MiB"], progress=False)
    assert pd.isna(frame.loc[0, "error"]) and frame.loc[0, "hit_ratio"] > 0
    assert pd.isna(frame.loc[1, "hit_ratio"])
    assert "unknown policy 'nonsense'" in frame.loc[1, "error"]


def test_local_and_ray_sweeps_give_equal_frames():
    ray = pytest.importorskip("ray")  # scripts/test installs it
    traces = [CLOUD, DATA / "arc_P3.lis.zst"]
    kwargs = dict(policies=["lru", "arc", "s3fifo"], capacities=[500, 5000], unit="objects", progress=False)
    local = tiercache.sweep(traces, **kwargs)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = tiercache.sweep(traces, backend="ray", **kwargs)
        failed = tiercache.sweep(CLOUD, policies=["nonsense"], capacities=[10], unit="objects",
                                 backend="ray", progress=False)
    finally:
        ray.shutdown()
    columns = [c for c in local.columns if c not in tiercache.TIMING_COLUMNS]
    assert len(local) == 12 and local["error"].isna().all()
    assert local[columns].equals(remote[columns])
    assert "unknown policy 'nonsense'" in failed.loc[0, "error"]


def test_the_engine_from_python(tmp_path):
    cache = tiercache.Cache(capacity="1MiB")
    assert cache.put(7, b"seven") and cache.get(7) == b"seven"
    assert cache.get(8) is None
    cache.delete(7)
    assert cache.get(7) is None
    stats = cache.stats()
    assert stats["hits"] == 1 and stats["misses"] == 2 and stats["puts"] == 1
    with pytest.raises(tiercache.TiercacheError, match="larger than the block size"):
        cache.put(1, bytes(cache.block_size + 1))
    # DRAM over a mapped slow-memory tier: DRAM's victims go down and are still hits.
    tier = tmp_path / "slow.tier"
    two = tiercache.Cache(capacity="64KiB", lower_capacity="1MiB", slow_path=tier, shards=1)
    for key in range(100):
        two.put(key, key.to_bytes(8, "little") * 512)
    assert all(two.get(key) == key.to_bytes(8, "little") * 512 for key in range(100))
    assert tier.exists() and oct(tier.stat().st_mode & 0o777) == "0o600"
    # Three tiers: DRAM over the slow tier over a flash tier; reads counted per tier.
    three = tiercache.Cache(
        capacity="64KiB", lower_capacity="128KiB", tier=["1MiB"],
        slow_path=tmp_path / "mid.tier", flash_path=tmp_path / "low.flash", shards=1,
    )
    for key in range(100):
        three.put(key, key.to_bytes(8, "little") * 512)
    assert all(three.get(key) == key.to_bytes(8, "little") * 512 for key in range(100))
    by_tier = three.stats()["tier_hits"]
    assert len(by_tier) == 3 and by_tier[2] > 0 and sum(by_tier) == 100
    with pytest.raises(tiercache.ConfigError, match="unit"):
        tiercache.Cache(capacity=100, unit="objects")
    # Bytes keys: stored whole with their values; the other kind of key is a TypeError.
    named = tiercache.Cache(capacity="1MiB", keys="bytes", block_size="4KiB")
    assert named.put(b"sst/000123.sst@4096", b"a data block")
    assert named.put(b"s3://bucket/part-1.parquet", bytes(4000))
    assert named.get(b"sst/000123.sst@4096") == b"a data block"
    assert named.get(b"s3://bucket/part-1.parquet") == bytes(4000)
    assert named.get(b"never") is None
    named.delete(b"sst/000123.sst@4096")
    assert named.get(b"sst/000123.sst@4096") is None
    with pytest.raises(TypeError, match="bytes"):
        named.get(7)
    with pytest.raises(TypeError, match="integers"):
        cache.get(b"seven")
    # Values of any size up to max_value: 64 MiB, or a shard's largest tier (1 MiB over 16
    # shards) if less; beyond a block they span pages, and read back whole.
    assert named.max_value == 64 * 1024
    big = bytes(range(256)) * 200
    assert named.put(b"table/000042.sst@0", big) and named.get(b"table/000042.sst@0") == big
    with pytest.raises(tiercache.TiercacheError, match="do not fit"):
        named.put(b"k", bytes(named.max_value))
    objects = tiercache.Cache(capacity="8MiB", shards=2, max_value="1MiB")
    assert objects.max_value == 1 << 20
    assert objects.put(5, big * 20) and objects.get(5) == big * 20
    assert objects.fetch(6, lambda: big * 10) == big * 10 and objects.get(6) == big * 10
    with pytest.raises(tiercache.TiercacheError, match="max_value"):
        objects.put(1, bytes((1 << 20) + 1))
    with pytest.raises(tiercache.ConfigError, match="max_value"):
        tiercache.Cache(capacity="1MiB", max_value="4MiB")
    with pytest.raises(tiercache.TiercacheError, match="int"):
        tiercache.Cache(capacity="1MiB", keys="strings")
    # fetch: a miss calls the loader once, a hit does not; what the loader raises comes back.
    calls = []
    def load():
        calls.append(1)
        return b"loaded"
    assert named.fetch(b"key", load) == b"loaded" and named.fetch(b"key", load) == b"loaded"
    assert cache.fetch(11, load) == b"loaded" and cache.get(11) == b"loaded"
    assert len(calls) == 2
    def broken():
        raise ValueError("the store is down")
    with pytest.raises(ValueError, match="the store is down"):
        named.fetch(b"other", broken)
    import threading
    slow_calls = []
    def slow():
        slow_calls.append(1)
        import time
        time.sleep(0.3)
        return b"slow"
    got = []
    threads = [threading.Thread(target=lambda: got.append(named.fetch(b"cold", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [b"slow"] * 8 and len(slow_calls) == 1


def test_tier_files_made_in_a_temporary_directory_go_with_the_cache(tmp_path):
    # tmp_path lies in the temp dir: a tier file made there goes when the cache closes...
    made = tmp_path / "made.tier"
    with tiercache.Cache(capacity="64KiB", lower_capacity="1MiB", slow_path=made, shards=1) as c:
        c.put(1, b"one")
        assert made.exists()
    assert not made.exists()
    with pytest.raises(ValueError, match="closed"):
        c.get(1)
    c.close()  # twice is nothing
    # ... or when its last reference goes,
    gone = tmp_path / "gone.flash"
    dropped = tiercache.Cache(capacity="64KiB", lower_capacity="1MiB", flash_path=gone, shards=1)
    assert gone.exists()
    del dropped
    assert not gone.exists()
    # unless asked to keep it: then it brings the cache back warm, and, there before, it stays.
    kept = tmp_path / "kept.tier"
    first = tiercache.Cache(
        capacity="64KiB", lower_capacity="1MiB", slow_path=kept, shards=1, keep_files=True
    )
    value = lambda key: key.to_bytes(8, "little") * 512
    for key in range(100):
        first.put(key, value(key))  # DRAM's victims go down to the slow tier's file
    first.close()
    assert kept.exists()
    second = tiercache.Cache(capacity="64KiB", lower_capacity="1MiB", slow_path=kept, shards=1)
    found = [second.get(key) for key in range(100)]
    assert all(v in (None, value(k)) for k, v in enumerate(found))
    assert sum(v is not None for v in found) >= 50, "warm from the kept file"
    second.close()
    assert kept.exists()


def test_the_readmes_python_blocks_run_as_written(tmp_path, monkeypatch):
    # In a directory that sees data/ as a fresh clone does, each block executed as pasted.
    readme = (DATA.parent / "README.md").read_text()
    blocks = [part.split("```", 1)[0] for part in readme.split("```python\n")[1:]]
    assert blocks, "the README has Python blocks"
    (tmp_path / "data").symlink_to(DATA)
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert not os.path.exists("/dev/shm/slow.tier"), "closed, the cache took its file along"


# The ARC paper's Table VII (Megiddo and Modha, FAST'03): LRU and ARC hit ratios in percent,
# unit-size pages; the same table crates/tiercache-cli/tests/arc_paper.rs checks through the CLI.
ARC_TABLE = {
    "arc_OLTP.lis.zst": {
        1000: (32.83, 38.93), 2000: (42.47, 46.08), 5000: (53.65, 55.25),
        10000: (60.70, 61.87), 15000: (64.63, 65.40),
    },
    "arc_P2.lis.zst": {32768: (18.47, 27.38), 131072: (51.49, 58.97)},
    "arc_P3.lis.zst": {32768: (3.57, 17.12), 131072: (44.79, 50.63)},
}


def test_the_arc_papers_numbers():
    for trace, table in ARC_TABLE.items():
        frame = tiercache.sweep(
            DATA / trace, policies=["lru", "arc"], capacities=list(table), unit="objects",
            format="arc-lis", progress=False,
        )
        for row in frame.itertuples():
            lru, arc = table[row.capacity]
            published, tolerance = (lru, 0.005) if row.policy == "lru" else (arc, 0.05)
            assert abs(row.hit_ratio * 100 - published) <= tolerance, (trace, row.policy, row.capacity)


def test_the_command_lines_sweep_on_ray(tmp_path):
    pytest.importorskip("ray")  # scripts/test installs it
    common = ["sweep", "--trace", str(CLOUD), "--policy", "lru", "--policy", "arc",
              "--capacities", "1MiB,8MiB"]
    cli(*common, "--out", str(tmp_path / "here"))
    # 'local' starts a Ray cluster of this machine for the run; a real one is HOST:PORT or auto.
    out = cli(*common, "--ray", "local", "--out", str(tmp_path / "ray"))
    assert "wrote" in out and (tmp_path / "ray" / "mrc.svg").exists()

    def hit_ratios(path):
        lines = (path / "sweep.csv").read_text().splitlines()
        header = lines[0].split(",")
        rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
        return {(r["policy"], int(float(r["capacity"]))): float(r["hit_ratio"]) for r in rows}

    assert hit_ratios(tmp_path / "here") == hit_ratios(tmp_path / "ray")
    assert len(hit_ratios(tmp_path / "ray")) == 4


def test_the_mrc_example_draws_its_curves(tmp_path):
    """examples/mrc.py, as the README runs it: a table of every policy at every size, and a PNG."""
    png = tmp_path / "mrc.png"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mrc.py"), str(CLOUD), "-o", str(png),
         "--policies", "lru,arc,s3fifo"],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [line.split() for line in done.stdout.splitlines()]
    sizes = {p: [row[1] for row in rows if row and row[0] == p] for p in ("lru", "arc", "s3fifo")}
    assert len(sizes["lru"]) >= 10 and sizes["lru"] == sizes["arc"] == sizes["s3fifo"], done.stdout


def test_the_mrc_example_without_matplotlib_stops_before_the_sweep(tmp_path):
    """A missing matplotlib stops the example at once, saying how to install it."""
    fake = tmp_path / "matplotlib"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mrc.py"), str(CLOUD), "-o", str(tmp_path / "x.png")],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert done.returncode != 0
    assert "pip install '.[plot]'" in done.stderr, done.stderr
    assert "requests" not in done.stdout, "it read the trace before stopping"
    assert not (tmp_path / "x.png").exists()
