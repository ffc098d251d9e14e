//! What `tiercache serve` is told: the command line over `--config FILE.toml` (its `[serve]`
//! table of options, its `[cache]` table of the policy stack, and its `[[export]]` tables), made
//! into the server's options and the exports it serves, each with the cache that serves it.
//!
//! The exports: the one of `--backing` (named [`nbd::EXPORT`]), each `--export NAME=PATH` (with
//! `,read-only`), and each `[[export]]` table, in that order; the first is the default (the
//! empty name). Each has its own backing file and its own cache: the one of `--backing` the
//! cache options as given; the others the same options less the tier files (`--slow-path`,
//! `--flash-path` and their sizes), which are one cache's alone (an `[[export]]` table names
//! its own), and less a `--dram 0`. A table holds an export's options (`name`, `backing`, `read_only`, `direct`,
//! `backing_profile` and the cache's); the server's (where it listens, TLS, limits) are
//! `[serve]`'s alone.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Parser;
use tiercache_engine::CacheConfig;
use tiercache_policy::StackSpec;

use super::ServeArgs;
use crate::cache_args::Defaults;
use crate::nbd;

/// The options of a `[serve]` or `[[export]]` table, parsed by the command line's own parser.
#[derive(clap::Parser)]
#[command(name = "serve")]
struct ServeTable {
    #[command(flatten)]
    args: ServeArgs,
}

impl ServeArgs {
    /// These options, each missing one taken from `file`.
    pub(super) fn or(self, file: ServeArgs) -> ServeArgs {
        ServeArgs {
            config: self.config,
            backing: self.backing.or(file.backing),
            direct: self.direct || file.direct,
            backing_profile: self.backing_profile.or(file.backing_profile),
            cache: self.cache.or(file.cache),
            listen: self.listen.or(file.listen),
            max_connections: self.max_connections.or(file.max_connections),
            metrics: self.metrics.or(file.metrics),
            threads_per_connection: self.threads_per_connection.or(file.threads_per_connection),
            read_only: self.read_only || file.read_only,
            tls_cert: self.tls_cert.or(file.tls_cert),
            tls_key: self.tls_key.or(file.tls_key),
            tls_psk: self.tls_psk.or(file.tls_psk),
            tls_client_ca: self.tls_client_ca.or(file.tls_client_ca),
            tls_crl: self.tls_crl.or(file.tls_crl),
            tls_authz: if self.tls_authz.is_empty() { file.tls_authz } else { self.tls_authz },
            insecure_no_tls: self.insecure_no_tls || file.insecure_no_tls,
            socket_mode: self.socket_mode.or(file.socket_mode),
            allow: self.allow.or(file.allow),
            deny: self.deny.or(file.deny),
            handshake_timeout: self.handshake_timeout.or(file.handshake_timeout),
            max_handshakes: self.max_handshakes.or(file.max_handshakes),
            memory_limit: self.memory_limit.or(file.memory_limit),
            request_timeout: self.request_timeout.or(file.request_timeout),
            idle_timeout: self.idle_timeout.or(file.idle_timeout),
            shutdown_timeout: self.shutdown_timeout.or(file.shutdown_timeout),
            max_handshakes_per_address: self
                .max_handshakes_per_address
                .or(file.max_handshakes_per_address),
            export: if self.export.is_empty() { file.export } else { self.export },
        }
    }
}

/// An export as the options describe it, before it is opened: its name, its options (its
/// backing file, whether read-only, its cache's options) and its cache.
pub(super) struct Planned {
    pub name: String,
    pub args: ServeArgs,
    pub config: CacheConfig,
}

/// The server's options (the config file's under the command line's) and its exports.
pub(super) fn resolve(args: &ServeArgs) -> anyhow::Result<(ServeArgs, Vec<Planned>)> {
    let (args, table, tables) = match &args.config {
        Some(path) => {
            let (file, table, tables) = read_config(path)?;
            (args.clone().or(file), table.map(|t| (path.clone(), t)), tables)
        }
        None => (args.clone(), None, Vec::new()),
    };
    let from_file = table.as_ref().map(|(path, _)| format!("{}: [cache]", path.display()));
    let stack = stack(table)?;
    let plan = |name: String, args: ServeArgs| -> anyhow::Result<Planned> {
        let place = format!("export '{name}'");
        if stack.is_some() {
            let given = args.cache.stack_options();
            if !given.is_empty() {
                bail!(
                    "{}: the [cache] table describes the stack, so {} cannot be given too \
                     ({place})",
                    from_file.as_deref().unwrap_or("--config"),
                    given.join(", ")
                );
            }
        }
        let config = match args.cache.config(&Defaults::SERVE, stack.clone()) {
            Ok(config) => config,
            Err(e) if name == nbd::EXPORT => return Err(e),
            Err(e) => return Err(e.context(place)),
        };
        // Errors of a stack read from the file name the file.
        if let Err(e) = config.stack() {
            return Err(match &from_file {
                Some(file) => anyhow::Error::from(e).context(file.clone()),
                None => anyhow::Error::from(e).context(place),
            });
        }
        Ok(Planned { name, args, config })
    };
    let mut planned = Vec::new();
    if args.backing.is_some() {
        planned.push(plan(nbd::EXPORT.to_string(), args.clone())?);
    }
    let inherited = inherited(&args);
    // A read-only export has nothing to write back: unless it says otherwise, its cache
    // writes through, whatever the server's mode.
    let adopt = |own: ServeArgs| {
        let mut from = inherited.clone();
        if (own.read_only || from.read_only) && own.cache.mode.is_none() {
            from.cache.mode = None;
        }
        own.or(from)
    };
    for value in &args.export {
        let (name, backing, read_only) = export_option(value)?;
        let own = ServeArgs { backing: Some(backing), read_only, ..ServeArgs::default() };
        planned.push(plan(name, adopt(own))?);
    }
    for (name, own) in tables {
        planned.push(plan(name, adopt(own))?);
    }
    distinct(&planned)?;
    Ok((args, planned))
}

/// What an export other than `--backing`'s takes from the server's options: the cache's
/// options less its tier files (and a DRAM size of 0, which only tier files make sense of),
/// and how to read the backing file; read-only if every export is.
fn inherited(args: &ServeArgs) -> ServeArgs {
    let mut cache = args.cache.clone();
    (cache.slow_path, cache.slow_size, cache.flash_path, cache.flash_size) =
        (None, None, None, None);
    if cache.dram.as_deref().and_then(|d| tiercache_core::parse_size(d).ok()) == Some(0) {
        cache.dram = None;
    }
    ServeArgs {
        cache,
        direct: args.direct,
        backing_profile: args.backing_profile.clone(),
        read_only: args.read_only,
        ..ServeArgs::default()
    }
}

/// `--export NAME=PATH` or `NAME=PATH,read-only`: the name, the path, and whether read-only.
fn export_option(value: &str) -> anyhow::Result<(String, PathBuf, bool)> {
    let usage = || format!("--export {value}: give NAME=PATH, or NAME=PATH,read-only");
    let (name, rest) = value.split_once('=').with_context(usage)?;
    let (path, read_only) = match rest.strip_suffix(",read-only") {
        Some(path) => (path, true),
        None => (rest, false),
    };
    if name.is_empty() || path.is_empty() {
        bail!(usage());
    }
    Ok((name.to_string(), PathBuf::from(path), read_only))
}

/// Refuses exports that would share what only one may have: a name, a backing file, a tier
/// file.
fn distinct(planned: &[Planned]) -> anyhow::Result<()> {
    if planned.is_empty() {
        bail!("--backing: the file to export is missing (or give exports with --export NAME=PATH)");
    }
    for (i, a) in planned.iter().enumerate() {
        if a.name.len() > nbd::STRING_MAX {
            bail!("export '{}…': a name of at most {} bytes", &a.name[..32], nbd::STRING_MAX);
        }
        for b in &planned[..i] {
            if a.name == b.name {
                bail!("export '{}' is named twice", a.name);
            }
            let same = |x: &Option<PathBuf>, y: &Option<PathBuf>| {
                x.as_ref().zip(y.as_ref()).is_some_and(|(x, y)| same_file(x, y))
            };
            if same(&a.args.backing, &b.args.backing) {
                bail!(
                    "exports '{}' and '{}' have one backing file: each needs its own",
                    b.name,
                    a.name
                );
            }
            let tiers =
                |p: &Planned| [p.args.cache.slow_path.clone(), p.args.cache.flash_path.clone()];
            for x in tiers(a) {
                for y in tiers(b) {
                    if same(&x, &y) {
                        bail!(
                            "exports '{}' and '{}' have one tier file ({}): a cache's tier files \
                             are its own",
                            b.name,
                            a.name,
                            x.expect("compared").display()
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether two paths name one file (by what they lead to, where both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The stack of a `[cache]` table (read from the config file at its path), if there is one.
fn stack(table: Option<(PathBuf, toml::Table)>) -> anyhow::Result<Option<StackSpec>> {
    let Some((path, mut table)) = table else { return Ok(None) };
    // The engine has no sequential cutoff (each shard sees only its own keys).
    if table.contains_key("mode") && !table.contains_key("seq_cutoff") {
        table.insert("seq_cutoff".into(), toml::Value::String("never".into()));
    }
    let spec = table.try_into().map_err(|e| anyhow::anyhow!("{}: [cache]: {e}", path.display()))?;
    Ok(Some(spec))
}

/// The sections of a `--config` file.
const SECTIONS: [&str; 3] = ["serve", "cache", "export"];

/// The options that are the server's, never one export's.
const SERVER_WIDE: [&str; 23] = [
    "config",
    "export",
    "listen",
    "max_connections",
    "metrics",
    "threads_per_connection",
    "tls_cert",
    "tls_key",
    "tls_psk",
    "tls_client_ca",
    "tls_crl",
    "tls_authz",
    "insecure_no_tls",
    "allow",
    "deny",
    "socket_mode",
    "handshake_timeout",
    "memory_limit",
    "max_handshakes",
    "max_handshakes_per_address",
    "request_timeout",
    "idle_timeout",
    "shutdown_timeout",
];

/// Reads `--config`: its `[serve]` options, its `[cache]` table if any, and its `[[export]]`
/// tables by name (paths made relative to the file).
type Config = (ServeArgs, Option<toml::Table>, Vec<(String, ServeArgs)>);

fn read_config(path: &Path) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut file: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}: not valid TOML", path.display()))?;
    if let Some(other) = file.keys().find(|s| !SECTIONS.contains(&s.as_str())) {
        bail!("{}: unknown section [{other}]; use [serve], [cache] and [[export]]", path.display());
    }
    let exports = match file.remove("export") {
        None => Vec::new(),
        Some(toml::Value::Array(tables)) => tables,
        Some(_) => bail!("{}: 'export' must be [[export]] tables", path.display()),
    };
    let mut table = |name: &str| match file.remove(name) {
        Some(toml::Value::Table(table)) => Ok(Some(table)),
        Some(_) => Err(anyhow::anyhow!("{}: '{name}' must be a table", path.display())),
        None => Ok(None),
    };
    let (serve, cache) = (table("serve")?.unwrap_or_default(), table("cache")?);
    if serve.contains_key("config") {
        bail!("{}: [serve] cannot name another config file", path.display());
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let args = options(&serve, base).with_context(|| format!("{}: [serve]", path.display()))?;
    let mut tables = Vec::new();
    for (i, export) in exports.into_iter().enumerate() {
        let place = format!("{}: [[export]] number {}", path.display(), i + 1);
        let toml::Value::Table(mut export) = export else { bail!("{place}: not a table") };
        let name = match export.remove("name") {
            Some(toml::Value::String(name)) if !name.is_empty() => name,
            _ => bail!("{place}: give its name (name = \"...\"), the one clients ask for"),
        };
        let place = format!("{}: [[export]] '{name}'", path.display());
        if let Some(key) = export.keys().find(|k| SERVER_WIDE.contains(&k.as_str())) {
            bail!("{place}: {key} is the server's, not an export's: give it in [serve]");
        }
        if !export.contains_key("backing") {
            bail!("{place}: give its backing file (backing = \"...\")");
        }
        tables.push((name, options(&export, base).with_context(|| place.clone())?));
    }
    Ok((args, cache, tables))
}

/// The options of a table, as the command line would give them, paths relative to `base`.
fn options(table: &toml::Table, base: &Path) -> anyhow::Result<ServeArgs> {
    let mut argv = vec!["serve".to_string()];
    tiercache_run::options::words(table, &[], &mut argv)?;
    let mut args = ServeTable::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("{e}"))?.args;
    let paths = [
        &mut args.backing,
        &mut args.cache.slow_path,
        &mut args.cache.flash_path,
        &mut args.tls_cert,
        &mut args.tls_key,
        &mut args.tls_client_ca,
        &mut args.tls_crl,
        &mut args.tls_psk,
    ];
    for path in paths.into_iter().flatten() {
        *path = base.join(&*path);
    }
    for value in &mut args.tls_authz {
        if let Some(file) = value.strip_prefix('@') {
            *value = format!("@{}", base.join(file).display());
        }
    }
    Ok(args)
}
