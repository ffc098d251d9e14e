//! The native module of the `tiercache` Python package: the simulator, trace reading and
//! writing, and the engine, each running the code the `tiercache` command runs. The package's
//! Python layer (`python/tiercache`) gives them their documented signatures; options cross
//! as JSON, results come back as JSON, and every long call releases the GIL.

use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use tiercache_core::{parse_size, Op, Request};
use tiercache_engine::MediumSpec;
use tiercache_engine::{Cache as EngineCache, CacheConfig, EngineError, KeyedCache, MediumKind};
use tiercache_policy::stack::Amount;
use tiercache_policy::{PolicyError, StackSpec};
use tiercache_sim::RunError;
use tiercache_workload::writer::{write_oracle_general, CsvWriter};
use tiercache_workload::{TraceError as ReadError, TraceFormat, TraceOptions, TraceReader};

pyo3::create_exception!(tiercache, TiercacheError, PyException, "Base of tiercache's errors.");
pyo3::create_exception!(
    tiercache,
    TraceError,
    TiercacheError,
    "A trace could not be read or written: the message names the file, and for a bad record \
     its line or record number and field."
);
pyo3::create_exception!(
    tiercache,
    ConfigError,
    TiercacheError,
    "An option or a stack configuration is not valid: the message names the setting."
);

/// The Python exception for an error of the Rust side, with the message the CLI prints.
fn to_py(error: anyhow::Error) -> PyErr {
    let message = tiercache_run::error_message(&error);
    for cause in error.chain() {
        if cause.downcast_ref::<ReadError>().is_some() {
            return TraceError::new_err(message);
        }
        // A simulation's error is its trace's or its policy's, without a layer of its own.
        match cause.downcast_ref::<RunError<ReadError>>() {
            Some(RunError::Stream(_)) => return TraceError::new_err(message),
            Some(RunError::Policy(_)) => return ConfigError::new_err(message),
            None => {}
        }
        if cause.downcast_ref::<PolicyError>().is_some() {
            return ConfigError::new_err(message);
        }
        if let Some(engine) = cause.downcast_ref::<EngineError>() {
            return match engine {
                EngineError::Config { .. } | EngineError::Policy(_) => {
                    ConfigError::new_err(message)
                }
                _ => TiercacheError::new_err(message),
            };
        }
    }
    ConfigError::new_err(message)
}

fn options_table(options_json: &str) -> anyhow::Result<toml::Table> {
    let value: serde_json::Value = serde_json::from_str(options_json)?;
    let serde_json::Value::Object(map) = value else {
        anyhow::bail!("options must be a mapping of names to values");
    };
    let mut table = toml::Table::new();
    for (key, value) in map {
        if value.is_null() {
            continue;
        }
        let value =
            toml::Value::try_from(&value).map_err(|e| anyhow::anyhow!("option '{key}': {e}"))?;
        table.insert(key, value);
    }
    Ok(table)
}

/// `sim` over `trace` with named options (the keys of an experiment file's `[cache]` table and
/// `sim`'s trace and run options); returns the report `tiercache sim --json` prints.
#[pyfunction]
fn sim_json(py: Python<'_>, trace: PathBuf, options_json: &str) -> PyResult<String> {
    let options = options_table(options_json).map_err(to_py)?;
    py.detach(|| {
        let output = tiercache_run::options::simulate_options(&trace, &options)?;
        Ok(serde_json::to_string(&output.to_json())?)
    })
    .map_err(to_py)
}

/// Cells over one trace, read once, on every core: `common_json` the options of every cell,
/// `cells_json` a list of each cell's own; returns a JSON list of `{"report": ...}` or
/// `{"error": message}`. `threads` 0 uses every core; `done`, if given, is called (with the
/// GIL) as each cell ends.
#[pyfunction]
#[pyo3(signature = (trace, common_json, cells_json, threads=0, done=None))]
fn sweep_json(
    py: Python<'_>,
    trace: PathBuf,
    common_json: &str,
    cells_json: &str,
    threads: usize,
    done: Option<Py<PyAny>>,
) -> PyResult<String> {
    let common = options_table(common_json).map_err(to_py)?;
    let cells: Vec<serde_json::Value> = serde_json::from_str(cells_json)
        .map_err(|e| ConfigError::new_err(format!("cells: {e}")))?;
    let cells = cells
        .iter()
        .map(|cell| options_table(&cell.to_string()))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(to_py)?;
    let tick = || {
        if let Some(done) = &done {
            // A failing callback (a closed progress bar) must not stop the sweep.
            Python::attach(|py| {
                let _ = done.call0(py);
            });
        }
    };
    let results = py
        .detach(|| tiercache_run::options::sweep_options(&trace, &common, &cells, threads, &tick))
        .map_err(to_py)?;
    let out: Vec<serde_json::Value> = results
        .into_iter()
        .map(|result| match result {
            Ok(output) => serde_json::json!({ "report": output.to_json() }),
            Err(error) => serde_json::json!({ "error": tiercache_run::error_message(&error) }),
        })
        .collect();
    Ok(serde_json::Value::Array(out).to_string())
}

/// Miss-ratio curves (`tiercache mrc`): `policies` by name, `capacities` as sizes or counts in
/// `unit`, sampled at `rate` or at most `sample_keys` keys over `samples` samples, LRU exact
/// from stack distances unless `sample_lru`; returns the points as a JSON list.
#[pyfunction]
#[pyo3(signature = (trace, format, policies, capacities, unit, rate, sample_keys, samples, sample_lru, seed, estimator, min_sampled_objects))]
#[allow(clippy::too_many_arguments)]
fn mrc_json(
    py: Python<'_>,
    trace: PathBuf,
    format: &str,
    policies: Vec<String>,
    capacities: Vec<String>,
    unit: &str,
    rate: f64,
    sample_keys: Option<u64>,
    samples: u32,
    sample_lru: bool,
    seed: u64,
    estimator: &str,
    min_sampled_objects: Option<u64>,
) -> PyResult<String> {
    use tiercache_sim::mrc::{curves, Estimator, SampledRun, Sampling};
    let run = || -> anyhow::Result<String> {
        let policies: Vec<tiercache_policy::PolicyConfig> = policies
            .iter()
            .map(|p| tiercache_policy::PolicyConfig::parse(p))
            .collect::<Result<_, _>>()?;
        let unit = match unit {
            "bytes" => tiercache_core::Unit::Bytes,
            "objects" => tiercache_core::Unit::Objects,
            other => anyhow::bail!("unit '{other}': use bytes or objects"),
        };
        let estimator = Estimator::parse(estimator).map_err(anyhow::Error::msg)?;
        let capacities = capacities
            .iter()
            .map(|c| {
                let amount = parse_size(c).map_err(|e| anyhow::anyhow!("capacity {c}: {e}"))?;
                anyhow::ensure!(amount > 0, "capacity {c} is zero");
                Ok(tiercache_core::Capacity { amount, unit })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        anyhow::ensure!(
            !capacities.is_empty() && !policies.is_empty(),
            "mrc needs a policy and a capacity"
        );
        anyhow::ensure!(samples >= 1, "samples must be at least 1");
        anyhow::ensure!(
            sample_keys.is_none() || min_sampled_objects.is_none(),
            "min_sampled_objects raises a fixed rate: give rate, not sample_keys"
        );
        anyhow::ensure!(min_sampled_objects != Some(0), "min_sampled_objects must be at least 1");
        let sampling = match sample_keys {
            Some(keys) => Sampling::Keys(keys.max(1)),
            None if rate > 0.0 && rate <= 1.0 => Sampling::Rate(rate),
            None => anyhow::bail!("rate must be in (0, 1], got {rate}"),
        };
        let options = trace_options(format, None, None, false)?;
        let mut reader = TraceReader::open(&trace, &options)?;
        let mut requests = Vec::new();
        for request in reader.by_ref() {
            requests.push(request?);
        }
        anyhow::ensure!(!requests.is_empty(), "{}: the trace has no requests", trace.display());
        let logical_time = !reader.info().has_time;
        let run = SampledRun {
            policies: &policies,
            capacities: &capacities,
            admission: &[],
            seed,
            logical_time,
            estimator,
            min_sampled_objects,
        };
        let (points, _) = curves(&requests, &run, sampling, samples, !sample_lru, &|| {})?;
        Ok(serde_json::to_string(&points)?)
    };
    py.detach(run).map_err(to_py)
}

fn trace_options(
    format: &str,
    csv_spec: Option<&str>,
    block_size: Option<&str>,
    skip_bad: bool,
) -> anyhow::Result<TraceOptions> {
    let format = TraceFormat::parse(format, csv_spec)?;
    let block_size = match block_size {
        None => None,
        Some(text) => {
            let bytes = parse_size(text).map_err(|e| anyhow::anyhow!("block_size {text}: {e}"))?;
            Some(
                u32::try_from(bytes)
                    .ok()
                    .filter(|b| *b > 0)
                    .ok_or_else(|| anyhow::anyhow!("block_size {text}: must be 1 to 4 GiB"))?,
            )
        }
    };
    Ok(TraceOptions { format, block_size, skip_bad })
}

fn op_code(op: Op) -> u8 {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Delete => 2,
        Op::Lookup => 3,
    }
}

/// The columns of a trace: (time, key, size, op) as little-endian u64, u64, u32 and u8 bytes,
/// and the number of records skipped.
type Columns = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, u64, String);

fn read_columns(
    path: &Path,
    options: &TraceOptions,
    limit: Option<u64>,
) -> anyhow::Result<Columns> {
    let mut reader = TraceReader::open(path, options)?;
    let (mut time, mut key, mut size, mut op) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let limit = limit.unwrap_or(u64::MAX);
    let mut n = 0u64;
    let mut batch = Vec::with_capacity(4096);
    while n < limit {
        batch.clear();
        reader.next_batch(&mut batch)?;
        if batch.is_empty() {
            break;
        }
        for r in batch.iter().take((limit - n).min(batch.len() as u64) as usize) {
            time.extend_from_slice(&r.time_us.to_le_bytes());
            key.extend_from_slice(&r.key.to_le_bytes());
            size.extend_from_slice(&r.size.to_le_bytes());
            op.push(op_code(r.op));
            n += 1;
        }
    }
    let format = reader.info().format.to_string();
    Ok((time, key, size, op, reader.skipped(), format))
}

/// Reads a trace into columns: bytearrays of time (u64, microseconds), key (u64), size (u32),
/// op (u8: 0 read, 1 write, 2 delete, 3 lookup), then the records skipped and the format read.
#[pyfunction]
#[pyo3(signature = (path, format="auto", csv_spec=None, block_size=None, skip_bad=false, limit=None))]
#[allow(clippy::type_complexity)]
fn read_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: &str,
    csv_spec: Option<&str>,
    block_size: Option<&str>,
    skip_bad: bool,
    limit: Option<u64>,
) -> PyResult<(
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    u64,
    String,
)> {
    let options = trace_options(format, csv_spec, block_size, skip_bad).map_err(to_py)?;
    let (time, key, size, op, skipped, format) =
        py.detach(|| read_columns(&path, &options, limit)).map_err(to_py)?;
    Ok((
        PyByteArray::new(py, &time),
        PyByteArray::new(py, &key),
        PyByteArray::new(py, &size),
        PyByteArray::new(py, &op),
        skipped,
        format,
    ))
}

fn column<const N: usize>(bytes: &[u8], name: &str, n: usize) -> anyhow::Result<Vec<[u8; N]>> {
    anyhow::ensure!(bytes.len() == n * N, "{name}: {} bytes for {n} records", bytes.len());
    Ok(bytes.chunks_exact(N).map(|c| c.try_into().expect("chunks of N")).collect())
}

/// Writes columns (as `read_trace` returns them) as an oracleGeneral trace (libCacheSim's
/// binary format; it keeps no operation) or as tiercache's CSV (`time_us,key,size,op`).
#[pyfunction]
fn write_trace(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    time: &[u8],
    key: &[u8],
    size: &[u8],
    op: &[u8],
) -> PyResult<u64> {
    let n = op.len();
    let build = || -> anyhow::Result<Vec<Request>> {
        let time = column::<8>(time, "time", n)?;
        let key = column::<8>(key, "key", n)?;
        let size = column::<4>(size, "size", n)?;
        let mut requests = Vec::with_capacity(n);
        for i in 0..n {
            let op = match op[i] {
                0 => Op::Read,
                1 => Op::Write,
                2 => Op::Delete,
                3 => Op::Lookup,
                other => anyhow::bail!("op of record {i}: {other} is not 0 to 3"),
            };
            let size = u32::from_le_bytes(size[i]);
            anyhow::ensure!(size > 0, "size of record {i}: 0");
            let (t, k) = (u64::from_le_bytes(time[i]), u64::from_le_bytes(key[i]));
            requests.push(Request::new(t, k, size, op));
        }
        Ok(requests)
    };
    let mut requests = build().map_err(|e| ConfigError::new_err(format!("{e:#}")))?;
    let format = format.to_string();
    py.detach(move || -> anyhow::Result<()> {
        match format.as_str() {
            "oracle-general" | "oracleGeneral" => write_oracle_general(&path, &mut requests)?,
            "csv" => {
                let mut writer = CsvWriter::create(&path)?;
                for r in &requests {
                    writer.write(r)?;
                }
                writer.finish()?;
            }
            other => anyhow::bail!("format '{other}': write oracle-general or csv"),
        }
        Ok(())
    })
    .map_err(to_py)?;
    Ok(n as u64)
}

/// The engine over DRAM and optionally a mapped (slow memory) or flash tier, its stack as
/// `sim`'s: keys are integers, or bytes (`keys="bytes"`: stored whole with the value and
/// compared on every read, `KeyedCache`); values bytes of at most `max_value` (less a bytes
/// key and its 4-byte length), spanning pages beyond the block size.
#[pyclass(module = "tiercache._tiercache")]
struct Cache {
    keys: Keys,
    block_size: usize,
}

/// The largest value of a cache of bytes keys when none is given: 64 MiB, or what a shard's
/// largest tier holds if less.
const BYTES_KEYS_MAX_VALUE: usize = 64 << 20;

/// The keys a Python cache takes: one kind a cache, so that an integer key never reads an
/// object stored under a bytes key.
enum Keys {
    Integers(EngineCache),
    Bytes(KeyedCache),
}

impl Cache {
    fn engine(&self) -> &EngineCache {
        match &self.keys {
            Keys::Integers(cache) => cache,
            Keys::Bytes(keyed) => keyed.cache(),
        }
    }
}

/// The integer key of a cache of integer keys.
fn integer(key: &Bound<'_, PyAny>) -> PyResult<u64> {
    key.extract().map_err(|_| {
        PyTypeError::new_err("this cache's keys are integers (from 0 to 2**64 - 1); keys=\"bytes\" makes one of bytes keys")
    })
}

/// The bytes key of a cache of bytes keys.
fn bytes_key(key: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    key.extract::<Vec<u8>>()
        .map_err(|_| PyTypeError::new_err("this cache's keys are bytes (keys=\"bytes\")"))
}

#[pymethods]
impl Cache {
    #[new]
    #[pyo3(signature = (options_json, block_size="4KiB", slow_path=None, flash_path=None, shards=16, keys="int", max_value=None, sync_interval=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, each its own setting.
    fn new(
        py: Python<'_>,
        options_json: &str,
        block_size: &str,
        slow_path: Option<PathBuf>,
        flash_path: Option<PathBuf>,
        shards: usize,
        keys: &str,
        max_value: Option<&str>,
        sync_interval: Option<&str>,
    ) -> PyResult<Cache> {
        let table = options_table(options_json).map_err(to_py)?;
        let build = || -> anyhow::Result<Cache> {
            // One description of the whole cache (`tiercache_engine::config`): the stack as
            // `sim` takes it, the media below DRAM (the slow tier, then the flash tier, those
            // given), and the engine's options.
            let stack: StackSpec = table.clone().try_into()?;
            let medium = |kind, path| MediumSpec { kind, path, profile: None };
            let slow = slow_path.map(|path| medium(MediumKind::Mapped, path));
            let flash = flash_path.map(|path| medium(MediumKind::Flash, path));
            let mut config = CacheConfig::new(stack, slow.into_iter().chain(flash).collect());
            let block = parse_size(block_size)
                .map_err(|e| anyhow::anyhow!("block_size {block_size}: {e}"))?;
            anyhow::ensure!(shards >= 1, "shards must be at least 1");
            config.engine.block_size = Amount::Count(block);
            config.engine.shards = shards;
            config.engine.max_value = max_value.map(|text| Amount::Text(text.into()));
            config.engine.sync_interval = sync_interval.map(String::from);
            let mut builder = config.builder()?;
            if keys == "bytes" && max_value.is_none() {
                builder = builder.max_value_at_most(BYTES_KEYS_MAX_VALUE);
            }
            let cache = builder.build()?;
            let keys = match keys {
                "int" => Keys::Integers(cache),
                "bytes" => Keys::Bytes(KeyedCache::new(cache)?),
                other => anyhow::bail!("keys {other:?}: \"int\" or \"bytes\""),
            };
            Ok(Cache { keys, block_size: block as usize })
        };
        py.detach(build).map_err(to_py)
    }

    /// The value of `key`, or None on a miss (a miss admits nothing).
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let value = match &self.keys {
            Keys::Integers(cache) => {
                let key = integer(key)?;
                py.detach(|| cache.get_object(key))
            }
            Keys::Bytes(keyed) => {
                let key = bytes_key(key)?;
                py.detach(|| keyed.get(&key))
            }
        };
        Ok(value.map(|value| PyBytes::new(py, &value)))
    }

    /// Writes `value` for `key`; returns whether it is cached (the policy may not admit it).
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &[u8]) -> PyResult<bool> {
        let put = match &self.keys {
            Keys::Integers(cache) => {
                let key = integer(key)?;
                py.detach(|| cache.put(key, value).map(|outcome| outcome.cached))
            }
            Keys::Bytes(keyed) => {
                let key = bytes_key(key)?;
                py.detach(|| keyed.insert(&key, value))
            }
        };
        put.map_err(|e| to_py(e.into()))
    }

    /// The value of `key`: a hit, or `load()` called (its bytes cached if the policy admits
    /// them); threads that miss one key at once call one `load` between them. An exception
    /// `load` raises is raised again, to each.
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        load: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let load = load.unbind();
        // Runs the Python loader (the GIL taken again for it) and keeps what it raised.
        let raised: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
        let call = || -> std::io::Result<Vec<u8>> {
            Python::attach(|py| {
                let value = load.call0(py).and_then(|v| v.extract::<Vec<u8>>(py));
                value.map_err(|e| {
                    let text = e.to_string();
                    *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    std::io::Error::other(text)
                })
            })
        };
        let fetched = match &self.keys {
            Keys::Integers(cache) => {
                let key = integer(key)?;
                let most = cache.max_value();
                py.detach(|| {
                    let load = || {
                        let value = call()?;
                        if value.len() > most {
                            return Err(std::io::Error::other(format!(
                                "a value of {} bytes is larger than the largest value of \
                                 {most} bytes",
                                value.len()
                            )));
                        }
                        Ok(value)
                    };
                    cache.fetch_object(key, load).map(|(value, _)| value)
                })
            }
            Keys::Bytes(keyed) => {
                let key = bytes_key(key)?;
                py.detach(|| keyed.fetch(&key, call))
            }
        };
        if let Some(e) = raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        let value = fetched.map_err(|e| to_py(e.into()))?;
        Ok(PyBytes::new(py, &value))
    }

    /// Drops `key` if cached.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        match &self.keys {
            Keys::Integers(cache) => {
                let key = integer(key)?;
                py.detach(|| cache.invalidate(key));
            }
            Keys::Bytes(keyed) => {
                let key = bytes_key(key)?;
                py.detach(|| keyed.remove(&key));
            }
        }
        Ok(())
    }

    /// The engine's counters as JSON.
    fn stats_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.engine().stats())
            .map_err(|e| TiercacheError::new_err(e.to_string()))
    }

    #[getter]
    fn block_size(&self) -> usize {
        self.block_size
    }

    #[getter]
    fn max_value(&self) -> usize {
        self.engine().max_value()
    }
}

#[pymodule]
fn _tiercache(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TiercacheError", py.get_type::<TiercacheError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add_function(wrap_pyfunction!(sim_json, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_json, m)?)?;
    m.add_function(wrap_pyfunction!(mrc_json, m)?)?;
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(write_trace, m)?)?;
    m.add_class::<Cache>()?;
    Ok(())
}
