//! Object storage as a benchmark needs it: a local directory made to answer like S3 (a first
//! byte after a set latency, bytes at a set bandwidth), and every request counted
//! ([`CountingStore`]), so a cache's worth shows as the GETs it saved. (object_store's own
//! `ThrottledStore` cannot stand over a local directory: it streams every GET, and the local
//! store hands back files.)

use std::fmt;
use std::path::Path as LocalPath;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use slatedb::object_store::local::LocalFileSystem;
use slatedb::object_store::path::Path;
use slatedb::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// How slow the object store answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// Before the first byte of every request (GET, PUT, LIST, DELETE).
    pub first_byte: Duration,
    /// Bytes a second a GET returns, after its first byte; 0 for no limit.
    pub bytes_per_second: u64,
}

impl Latency {
    /// S3 within a region, roughly: 20 ms to the first byte, 100 MB/s a request.
    pub const S3: Latency =
        Latency { first_byte: Duration::from_millis(20), bytes_per_second: 100_000_000 };

    /// None: the local directory as it is.
    pub const NONE: Latency = Latency { first_byte: Duration::ZERO, bytes_per_second: 0 };
}

/// A local directory (made if missing) as an object store answering with `latency`, counted.
pub fn local(root: &LocalPath, latency: Latency) -> Result<Arc<CountingStore>> {
    std::fs::create_dir_all(root).map_err(|source| slatedb::object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(source),
    })?;
    let local = LocalFileSystem::new_with_prefix(root)?;
    Ok(Arc::new(CountingStore::new(Arc::new(local), latency)))
}

/// Requests to an object store, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Requests {
    pub gets: u64,
    pub get_bytes: u64,
    pub puts: u64,
}

impl std::ops::Sub for Requests {
    type Output = Requests;

    fn sub(self, earlier: Requests) -> Requests {
        Requests {
            gets: self.gets - earlier.gets,
            get_bytes: self.get_bytes - earlier.get_bytes,
            puts: self.puts - earlier.puts,
        }
    }
}

/// An object store whose GETs (and the bytes they returned) and PUTs are counted, each
/// answered after [`Latency`]'s wait: its first byte's, then its bytes at its bandwidth.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    latency: Latency,
    gets: AtomicU64,
    get_bytes: AtomicU64,
    puts: AtomicU64,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>, latency: Latency) -> CountingStore {
        CountingStore {
            inner,
            latency,
            gets: AtomicU64::new(0),
            get_bytes: AtomicU64::new(0),
            puts: AtomicU64::new(0),
        }
    }

    /// Waits as the store would for a request of `bytes` bytes.
    async fn wait(&self, bytes: u64) {
        let Latency { first_byte, bytes_per_second } = self.latency;
        let transfer = match bytes_per_second {
            0 => Duration::ZERO,
            rate => Duration::from_secs_f64(bytes as f64 / rate as f64),
        };
        if !(first_byte + transfer).is_zero() {
            tokio::time::sleep(first_byte + transfer).await;
        }
    }

    /// The requests so far.
    pub fn requests(&self) -> Requests {
        Requests {
            gets: self.gets.load(Ordering::Relaxed),
            get_bytes: self.get_bytes.load(Ordering::Relaxed),
            puts: self.puts.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "counted({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.wait(payload.content_length() as u64).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.wait(0).await;
        self.inner.put_multipart_opts(location, opts).await
    }

    // `get_ranges` and the other reads are left to the trait, which makes them of `get_opts`:
    // each range read is a GET here, as it is to S3.
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        let got = self.inner.get_opts(location, options).await?;
        let bytes = got.range.end - got.range.start;
        self.get_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.wait(bytes).await;
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.wait(0).await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.wait(0).await;
        self.inner.copy_opts(from, to, options).await
    }
}
