//! `tiercache serve` against real NBD clients: QEMU's `qemu-io` writes and reads patterns
//! (aligned and not) and `qemu-img compare` checks the whole export against a reference file,
//! in write-through and write-back, across a kill -9 of the server after a flush and a clean
//! stop by SIGTERM; fio's nbd engine runs mixed random I/O from several jobs with every block
//! verified. `scripts/test` installs the clients (Debian's `qemu-utils` and `fio`).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

const SIZE: usize = 8 << 20;

struct Server {
    child: Child,
    socket: PathBuf,
    /// What it logged before it listened.
    log: String,
    /// What it logged since, as it comes.
    later: Arc<Mutex<String>>,
}

/// A fresh directory for test `name`, with a backing file of `SIZE` bytes of `byte`: the
/// directory, the backing file, a tier file's path and a socket's path.
fn fresh(name: &str, byte: u8) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let dir = common::scratch("serve", name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (backing, tier, socket) = (dir.join("backing.img"), dir.join("tier.mem"), dir.join("sock"));
    std::fs::write(&backing, vec![byte; SIZE]).unwrap();
    (dir, backing, tier, socket)
}

/// Starts `tiercache serve` over `backing` and waits for its "listening" line.
fn serve(backing: &Path, socket: &Path, tier: &Path, mode: &str) -> Server {
    serve_with(backing, socket, tier, mode, &[])
}

fn serve_with(backing: &Path, socket: &Path, tier: &Path, mode: &str, more: &[&str]) -> Server {
    let listen = format!("unix:{}", socket.display());
    let mut args = vec!["--backing", backing.to_str().unwrap(), "--dram", "0"];
    args.extend(["--slow-path", tier.to_str().unwrap(), "--slow-size", "2MiB"]);
    args.extend(["--mode", mode, "--shards", "2", "--listen", &listen]);
    args.extend(more);
    start(&args, socket)
}

/// Starts `tiercache serve ARGS`, which listens on `socket`.
fn start(args: &[&str], socket: &Path) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tiercache"));
    command.arg("serve").args(args);
    start_command(command, socket)
}

/// Starts `command`, a `tiercache serve` that listens on `socket`.
fn start_command(mut command: Command, socket: &Path) -> Server {
    let mut child = command.stderr(Stdio::piped()).spawn().expect("start tiercache serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    loop {
        let line = lines.next().expect("the server logs before it listens").unwrap();
        log += &line;
        log += "\n";
        if line.contains("listening on") {
            break;
        }
        assert!(!line.contains("error"), "{log}");
    }
    // The rest of the log is drained as it comes, so the server never blocks on it.
    let later = Arc::new(Mutex::new(String::new()));
    let kept = later.clone();
    std::thread::spawn(move || {
        lines.map_while(Result::ok).for_each(|l| *kept.lock().unwrap() += &(l + "\n"))
    });
    Server { child, socket: socket.to_path_buf(), log, later }
}

impl Server {
    /// Waits up to five seconds for the server to log a line containing `text`; what it
    /// logged since it listened.
    fn logs(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let later = self.later.lock().unwrap().clone();
            if later.contains(text) || std::time::Instant::now() > deadline {
                return later;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// SIGTERM, then the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on the child's own pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }

    /// SIGKILL: nothing of the server runs after it.
    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    /// A test that fails leaves no server behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs qemu-io's commands against the server; panics with its output on any failure.
fn qemu_io(server: &Server, commands: &[&str]) -> String {
    let mut cmd = Command::new("qemu-io");
    cmd.args(["-f", "raw", &server.uri()]);
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd.output().expect("qemu-io (scripts/test installs qemu-utils)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !text.contains("fail"), "qemu-io {commands:?}: {text}");
    text
}

/// Whether `qemu-img compare` finds the export identical to `reference`.
fn compare(server: &Server, reference: &Path) -> bool {
    let out = Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw", &server.uri(), reference.to_str().unwrap()])
        .output()
        .expect("qemu-img (scripts/test installs qemu-utils)");
    out.status.success()
}

/// The writes the clients make, applied to a reference image.
fn apply(reference: &mut [u8], writes: &[(usize, usize, u8)]) {
    for &(at, len, byte) in writes {
        reference[at..at + len].fill(byte);
    }
}

/// Three tiers behind the NBD export: DRAM over a mapped tier over a flash tier, write-back.
/// qemu-io's writes spill through all three; the export equals the reference, after a kill -9
/// too, and a clean stop leaves the backing file equal to it.
#[test]
fn qemu_over_three_tiers_in_write_back_across_kill_9() {
    let dir = common::scratch("serve", "three");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (backing, socket) = (dir.join("backing.img"), dir.join("sock"));
    let (mid, low) = (dir.join("mid.mem"), dir.join("low.flash"));
    std::fs::write(&backing, vec![0u8; SIZE]).unwrap();
    let listen = format!("unix:{}", socket.display());
    let args = [
        "--backing",
        backing.to_str().unwrap(),
        "--dram",
        "256KiB",
        "--slow-path",
        mid.to_str().unwrap(),
        "--slow-size",
        "512KiB",
        "--flash-path",
        low.to_str().unwrap(),
        "--flash-size",
        "4MiB",
        "--mode",
        "wb",
        "--shards",
        "2",
        "--listen",
        &listen,
    ];
    let server = start(&args, &socket);
    // 3 MiB written: more than DRAM and the mapped tier hold, so blocks reach the flash tier.
    qemu_io(
        &server,
        &[
            "write -P 0x61 0 1m",
            "write -P 0x62 1m 1m",
            "write -P 0x63 2m 1m",
            "write -P 0x64 4k 4k",
            "read -P 0x61 0 4k",
            "read -P 0x64 4k 4k",
            "read -P 0x62 1m 1m",
            "flush",
        ],
    );
    let mut reference = vec![0u8; SIZE];
    apply(
        &mut reference,
        &[
            (0, 1 << 20, 0x61),
            (1 << 20, 1 << 20, 0x62),
            (2 << 20, 1 << 20, 0x63),
            (4096, 4096, 0x64),
        ],
    );
    let reference_path = dir.join("reference.img");
    std::fs::write(&reference_path, &reference).unwrap();
    assert!(compare(&server, &reference_path), "three tiers: the export differs");
    server.kill9();
    let server = start(&args, &socket);
    assert!(compare(&server, &reference_path), "three tiers: after kill -9, the export differs");
    let status = server.stop();
    assert!(status.success(), "the server exited with {status}");
    let stored = std::fs::read(&backing).unwrap();
    let first = stored.iter().zip(&reference).position(|(a, b)| a != b);
    assert_eq!(first, None, "the backing file differs from the reference at byte {first:?}");
}

#[test]
fn qemu_reads_and_writes_through_the_server_in_wt_and_wb_across_kill_9() {
    for mode in ["wt", "wb"] {
        let dir = common::scratch("serve", mode);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (backing, tier, socket) =
            (dir.join("backing.img"), dir.join("tier.mem"), dir.join("sock"));
        std::fs::write(&backing, vec![0u8; SIZE]).unwrap();
        let mut reference = vec![0u8; SIZE];
        let server = serve(&backing, &socket, &tier, mode);
        // Aligned, unaligned (a partial block at each end), zeroed.
        qemu_io(
            &server,
            &[
                "write -P 0xab 0 64k",
                "read -P 0xab 0 64k",
                "write -P 0xcd 1000 5000",
                "read -P 0xcd 1000 5000",
                "read -P 0xab 0 1000",
                "write -z 8k 4k",
                "read -P 0 8k 4k",
                "write -P 0x11 1m 3m",
                // Requests in flight together, served side by side.
                "aio_write -P 0x33 5m 64k",
                "aio_write -P 0x44 6m 64k",
                "aio_write -P 0x55 7m 4k",
                "aio_flush",
                "read -P 0x33 5m 64k",
                "read -P 0x44 6m 64k",
                "flush",
            ],
        );
        apply(
            &mut reference,
            &[
                (0, 65536, 0xab),
                (1000, 5000, 0xcd),
                (8192, 4096, 0),
                (1 << 20, 3 << 20, 0x11),
                (5 << 20, 65536, 0x33),
                (6 << 20, 65536, 0x44),
                (7 << 20, 4096, 0x55),
            ],
        );
        let reference_path = dir.join("reference.img");
        std::fs::write(&reference_path, &reference).unwrap();
        assert!(compare(&server, &reference_path), "{mode}: the export differs from the reference");
        // kill -9 after the flush: the restarted server (recovering the tier) serves the same.
        server.kill9();
        let server = serve(&backing, &socket, &tier, mode);
        assert!(compare(&server, &reference_path), "{mode}: after kill -9, the export differs");
        qemu_io(&server, &["write -P 0x22 4m 8k", "read -P 0x22 4m 8k"]);
        apply(&mut reference, &[(4 << 20, 8192, 0x22)]);
        // SIGTERM: a clean stop writes everything back; the backing file alone is the image.
        let status = server.stop();
        assert!(status.success(), "{mode}: the server exited with {status}");
        let stored = std::fs::read(&backing).unwrap();
        let first = stored.iter().zip(&reference).position(|(a, b)| a != b);
        assert_eq!(
            first, None,
            "{mode}: the backing file differs from the reference at byte {first:?}"
        );
        assert!(!socket.exists(), "{mode}: the socket was left behind");
    }
}

#[test]
fn bad_requests_get_errors_and_bad_handshakes_close_only_their_connection() {
    let (_, backing, tier, socket) = fresh("bad", 0);
    let server = serve(&backing, &socket, &tier, "wt");
    // A client that sends garbage instead of its flags: that connection closes.
    let mut bad = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut greeting = [0u8; 18];
    bad.read_exact(&mut greeting).unwrap();
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    bad.write_all(&[0xff; 4]).unwrap();
    let mut rest = Vec::new();
    assert_eq!(bad.read_to_end(&mut rest).unwrap(), 0, "the server closes a bad handshake");
    // A request past the end of the export gets EINVAL, and the connection goes on.
    let (mut client, size, _) = export(&socket);
    assert_eq!(size, SIZE as u64);
    let mut reply = [0u8; 16];
    client.write_all(&request(0, 1, SIZE as u64 - 512, 4096)).unwrap();
    client.read_exact(&mut reply).unwrap();
    assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 22, "EINVAL past the end");
    assert_eq!(u64::from_be_bytes(reply[8..16].try_into().unwrap()), 1, "the cookie comes back");
    client.write_all(&request(42, 2, 0, 0)).unwrap();
    client.read_exact(&mut reply).unwrap();
    assert_eq!(
        u32::from_be_bytes(reply[4..8].try_into().unwrap()),
        22,
        "EINVAL for an unknown command"
    );
    client.write_all(&request(0, 3, 0, 512)).unwrap();
    client.read_exact(&mut reply).unwrap();
    assert_eq!(
        u32::from_be_bytes(reply[4..8].try_into().unwrap()),
        0,
        "a good read after the bad ones"
    );
    let mut data = [1u8; 512];
    client.read_exact(&mut data).unwrap();
    assert_eq!(data, [0u8; 512]);
    drop((bad, client));
    // The server still serves a real client.
    qemu_io(&server, &["write -P 0x5a 0 4k", "read -P 0x5a 0 4k"]);
    assert!(server.stop().success());
}

/// `--metrics`: Prometheus text at /metrics, with the cache's counters and, per NBD command,
/// requests, bytes and a latency histogram; scrapes are answered among slow and endless
/// clients, and among 100 that drip their request lines.
#[test]
fn metrics_count_the_requests_served() {
    let (_, backing, tier, socket) = fresh("metrics", 0);
    let server = serve_with(&backing, &socket, &tier, "wb", &["--metrics", "127.0.0.1:0"]);
    let address = server
        .log
        .lines()
        .find_map(|l| l.split("metrics on http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("the server logs its metrics address")
        .to_string();
    qemu_io(&server, &["write -P 0x66 0 64k", "read -P 0x66 0 64k", "read -P 0x66 0 64k", "flush"]);
    let mut http = std::net::TcpStream::connect(&address).unwrap();
    http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut response = String::new();
    http.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 200"), "{response}");
    let value = |name: &str| -> f64 {
        let line =
            response.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("tiercache_nbd_requests_total{command=\"write\"}"), 1.0);
    assert_eq!(value("tiercache_nbd_requests_total{command=\"read\"}"), 2.0);
    assert_eq!(value("tiercache_nbd_bytes_total{command=\"read\"}"), 131072.0);
    // qemu-io flushes once more as it closes the image.
    assert!(value("tiercache_nbd_request_seconds_count{command=\"flush\"}") >= 1.0);
    assert!(value("tiercache_hits ") >= 16.0, "the second read hit: {response}");
    assert!(value("tiercache_dirty_blocks ") >= 16.0, "write-back keeps them dirty");
    // Every metric the Grafana dashboard in docs/ plots is served.
    let dashboard =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-tiercache-serve.json");
    let dashboard = std::fs::read_to_string(dashboard).unwrap();
    let names = dashboard
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("tiercache_"));
    for name in names {
        assert!(response.contains(&format!("\n{name}")), "the dashboard plots {name}, not served");
    }
    let mut other = std::net::TcpStream::connect(&address).unwrap();
    other.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut response = String::new();
    other.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 404"), "{response}");
    // A client that sends a byte now and then, and one that sends an endless request line:
    // neither blocks a scrape, and the endless one is closed without being read whole.
    let mut drip = std::net::TcpStream::connect(&address).unwrap();
    drip.write_all(b"G").unwrap();
    let mut endless = std::net::TcpStream::connect(&address).unwrap();
    let _ = endless.write_all(&vec![b'A'; 1 << 20]);
    let started = std::time::Instant::now();
    let mut scrape = std::net::TcpStream::connect(&address).unwrap();
    scrape.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut response = String::new();
    scrape.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 200"), "{response}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
    let mut rest = Vec::new();
    endless.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    assert!(endless.read_to_end(&mut rest).is_ok_and(|n| n == 0) || rest.is_empty());
    drop(drip);
    // 100 connections dripping a request line a byte every 0.2 s (issue 49's slowloris, which
    // took all eight slots for request lines): every real scrape among them is answered
    // within a second.
    let slow: Vec<_> = (0..100)
        .map(|_| {
            let address = address.clone();
            std::thread::spawn(move || {
                let Ok(mut client) = std::net::TcpStream::connect(&address) else { return };
                for byte in b"GET /metrics HTTP/1.0" {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    if client.write_all(std::slice::from_ref(byte)).is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..10 {
        let started = std::time::Instant::now();
        let mut scrape = std::net::TcpStream::connect(&address).unwrap();
        scrape.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut response = String::new();
        scrape.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.0 200"), "a scrape among drippers: {response}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    slow.into_iter().for_each(|t| t.join().unwrap());
    assert!(server.stop().success());
}

/// Over TCP (`--listen tcp:127.0.0.1:0`, the bound port logged), with qemu-io's `nbd://` URI.
#[test]
fn qemu_reads_and_writes_over_tcp() {
    let dir = common::scratch("serve", "tcp");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (backing, tier) = (dir.join("backing.img"), dir.join("tier.mem"));
    std::fs::write(&backing, vec![0u8; SIZE]).unwrap();
    let slow = ["--slow-path", tier.to_str().unwrap(), "--slow-size", "2MiB"];
    let (mut child, address) = serve_tcp(&backing, &slow);
    let out = Command::new("qemu-io")
        .args(["-f", "raw", &format!("nbd://{address}")])
        .args([
            "-c",
            "write -P 0x42 12k 20k",
            "-c",
            "read -P 0x42 12k 20k",
            "-c",
            "read -P 0 0 12k",
        ])
        .output()
        .expect("qemu-io");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // SAFETY: kill(2) on the child's own pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(out.status.success() && !text.contains("fail"), "{text}");
    assert!(status.success(), "{status}");
    let stored = std::fs::read(&backing).unwrap();
    assert!(stored[12 << 10..32 << 10].iter().all(|b| *b == 0x42));
}

/// fio's nbd engine (libnbd): two jobs of mixed random 4 KiB reads and writes, 16 in flight
/// each, every written block read back and checked (CRC32C), in write-through and write-back,
/// and in write-back over a backing file read and written with direct I/O.
#[test]
fn fio_mixed_random_io_verifies_in_wt_and_wb() {
    for (mode, more) in [("wt", &[][..]), ("wb", &[][..]), ("wb", &["--direct"][..])] {
        let dir = common::scratch("serve", &format!("fio-{mode}-{}", more.len()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (backing, tier, socket) =
            (dir.join("backing.img"), dir.join("tier.mem"), dir.join("sock"));
        std::fs::write(&backing, vec![0u8; SIZE]).unwrap();
        let server = serve_with(&backing, &socket, &tier, mode, more);
        assert_eq!(server.log.contains("with direct I/O"), !more.is_empty(), "{}", server.log);
        let out = Command::new("fio")
            .args(["--name=verify", "--ioengine=nbd", &format!("--uri={}", server.uri())])
            .args([
                "--rw=randrw",
                "--rwmixread=50",
                "--bs=4k",
                "--size=4M",
                "--offset_increment=4M",
            ])
            .args(["--numjobs=2", "--iodepth=16", "--verify=crc32c", "--verify_backlog=32"])
            .args(["--verify_fatal=1", "--group_reporting"])
            // fio leaves its verify state files where it runs.
            .current_dir(&dir)
            .output()
            .expect("fio (scripts/test installs it)");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("err= 0"), "{mode}: {text}");
        assert!(server.stop().success(), "{mode}");
    }
}

/// A config file describes the whole server: its `[serve]` table the options (paths relative
/// to the file), its `[cache]` table the policy stack in the schema `sim` and experiment files
/// use. An option on the command line wins over the file; a stack option beside `[cache]`, an
/// unknown key or section is an error naming the file.
#[test]
fn a_config_file_describes_the_server_and_its_stack() {
    let dir = common::scratch("serve", "config");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("disk.img"), vec![0u8; SIZE]).unwrap();
    let socket = dir.join("sock");
    let config = dir.join("serve.toml");
    let text = format!(
        "[serve]\nbacking = \"disk.img\"\nslow_path = \"tier.mem\"\nlisten = \"unix:{}\"\n\
         shards = 2\nmax_connections = 0\nbacking_profile = \"nvme\"\n\n\
         [cache]\npolicy = \"lru\"\ncapacity = \"1MiB\"\nlower_capacity = \"2MiB\"\n\
         mode = \"wb\"\nadmission = \"always\"\n",
        socket.display()
    );
    std::fs::write(&config, text).unwrap();
    // The file's max_connections = 0 would refuse every client: the command line's wins.
    let args = ["--config", config.to_str().unwrap(), "--max-connections", "4"];
    let server = start(&args, &socket);
    assert!(server.log.contains("mode wb"), "{}", server.log);
    assert!(server.log.contains("behaving as nvme"), "{}", server.log);
    assert!(server.log.contains(&dir.join("disk.img").display().to_string()), "{}", server.log);
    qemu_io(&server, &["write -P 0x5a 12288 8192", "flush"]);
    let read = qemu_io(&server, &["read -P 0x5a 12288 8192"]);
    assert!(read.contains("read 8192/8192"), "{read}");
    // TRIM, WRITE_ZEROES that may punch (-u) and that may not, over written blocks, whole
    // and partial.
    qemu_io(&server, &["write -P 0x77 65536 65536", "flush"]);
    qemu_io(&server, &["discard 65536 8192", "write -z -u 73728 8192", "write -z 81920 4000"]);
    qemu_io(&server, &["read -P 0 65536 20384", "read -P 0x77 85920 45152"]);
    assert!(server.stop().success());
    // Written back at the stop, to the backing file the config named.
    let disk = std::fs::read(dir.join("disk.img")).unwrap();
    assert!(disk[12288..20480].iter().all(|&b| b == 0x5a));
    assert!(
        disk[65536..85920].iter().all(|&b| b == 0)
            && disk[85920..131072].iter().all(|&b| b == 0x77)
    );
    assert!(dir.join("tier.mem").exists(), "the slow tier lives where [serve] said");

    let refused = |args: &[&str], config_text: &str| -> String {
        std::fs::write(&config, config_text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let base = "[serve]\nbacking = \"disk.img\"\nlisten = \"unix:/nonexistent/sock\"\n";
    let error =
        refused(&[], &format!("{base}[cache]\npolicy = \"lru\"\ncapacity = \"1MiB\"\nsize = 3\n"));
    assert!(error.contains("serve.toml") && error.contains("size"), "{error}");
    let error = refused(
        &["--dram", "1MiB"],
        &format!("{base}[cache]\npolicy = \"lru\"\ncapacity = \"1MiB\"\n"),
    );
    assert!(error.contains("serve.toml") && error.contains("--dram"), "{error}");
    let error = refused(&[], &format!("{base}[devices]\nprofile = \"dram\"\n"));
    assert!(error.contains("serve.toml") && error.contains("[devices]"), "{error}");
    let error = refused(&[], "[serve]\nbackng = \"disk.img\"\n");
    assert!(error.contains("serve.toml") && error.contains("backng"), "{error}");
}

/// Connects to `socket` and finishes the fixed-newstyle handshake by NBD_OPT_EXPORT_NAME.
fn handshake(socket: &Path) -> std::os::unix::net::UnixStream {
    export(socket).0
}

/// As [`handshake`], with the export's size and transmission flags.
fn export(socket: &Path) -> (std::os::unix::net::UnixStream, u64, u16) {
    let mut client = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let mut greeting = [0u8; 18];
    client.read_exact(&mut greeting).unwrap();
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    client.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
    client.write_all(&0x4948_4156_454F_5054u64.to_be_bytes()).unwrap();
    client.write_all(&1u32.to_be_bytes()).unwrap(); // NBD_OPT_EXPORT_NAME
    client.write_all(&0u32.to_be_bytes()).unwrap(); // ""
    let mut export = [0u8; 10];
    client.read_exact(&mut export).unwrap();
    let size = u64::from_be_bytes(export[..8].try_into().unwrap());
    (client, size, u16::from_be_bytes(export[8..10].try_into().unwrap()))
}

/// An NBD request header.
fn request(kind: u16, cookie: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    b.extend_from_slice(&0u16.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&cookie.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&length.to_be_bytes());
    b
}

/// The resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Whether the server closes `client` within `within` (a read finds the end).
fn closed_within(client: &mut std::os::unix::net::UnixStream, within: f64) -> bool {
    client.set_read_timeout(Some(std::time::Duration::from_secs_f64(within))).unwrap();
    let mut bytes = [0u8; 64];
    // What the server sent before (its greeting) is read past.
    loop {
        match client.read(&mut bytes) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

/// Exposure by choice: TCP off loopback is refused without --insecure-no-tls; the unix socket
/// is its owner's alone even under umask 000; a second server on the same backing file is
/// refused. Hostile clients held off: silent connections are closed at the handshake timeout
/// (so they cannot fill --max-connections for good), idle ones at the idle timeout; writes
/// announced and never sent cost no memory; and a stop while a client reads none of its
/// replies ends within the shutdown timeout, the dirty blocks written back.
#[test]
fn serve_is_exposed_by_choice_and_holds_hostile_clients_off() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let (dir, backing, tier, socket) = fresh("hostile", 0);
    let base = |socket: &Path, tier: &Path| -> Vec<String> {
        let listen = format!("unix:{}", socket.display());
        [
            "serve",
            "--backing",
            backing.to_str().unwrap(),
            "--dram",
            "0",
            "--slow-path",
            tier.to_str().unwrap(),
            "--slow-size",
            "2MiB",
            "--mode",
            "wb",
            "--shards",
            "2",
            "--listen",
            &listen,
        ]
        .map(String::from)
        .to_vec()
    };
    // TCP off loopback, without TLS: refused, and the way out named.
    let mut args = base(&socket, &tier);
    let at = args.iter().position(|a| a == "--listen").unwrap();
    args[at + 1] = "tcp:0.0.0.0:0".into();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache")).args(&args).output().unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("--insecure-no-tls"), "{error}");

    // Under umask 000, the socket is still 0600.
    let mut command = Command::new(env!("CARGO_BIN_EXE_tiercache"));
    command.args(base(&socket, &tier)).args([
        "--handshake-timeout",
        "0.5",
        "--idle-timeout",
        "1",
        "--max-connections",
        "4",
        "--shutdown-timeout",
        "1",
    ]);
    // SAFETY: umask in the child before exec; nothing else runs there.
    unsafe {
        command.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let server = start_command(command, &socket);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket is its owner's alone");

    // A second server on the same backing file is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(base(&dir.join("sock2"), &dir.join("tier2.mem")))
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("another server"), "{error}");

    // Four silent connections: the handshake deadline closes them (they never held one of
    // the --max-connections 4, which are for connections past their handshake).
    let mut silent: Vec<_> =
        (0..4).map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap()).collect();
    for client in &mut silent {
        assert!(closed_within(client, 5.0), "a silent connection outlived the handshake timeout");
    }
    qemu_io(&server, &["write -P 0x3c 0 64k", "read -P 0x3c 0 64k"]);
    // An idle connection is closed at the idle timeout.
    let mut idle = handshake(&socket);
    assert!(closed_within(&mut idle, 5.0), "an idle connection outlived --idle-timeout");

    // Three connections each announce a 128 MiB write and send none of it: no memory spent.
    let before = rss(server.child.id());
    let mut unpaid: Vec<_> = (0..3).map(|_| handshake(&socket)).collect();
    for (i, client) in unpaid.iter_mut().enumerate() {
        client.write_all(&request(1, i as u64, 0, 128 << 20)).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let grown = rss(server.child.id()).saturating_sub(before);
    assert!(grown < 32 << 20, "announced writes took {grown} bytes");
    drop(unpaid);

    // A client that sends reads and never reads a reply; then SIGTERM: the server stops
    // within the shutdown timeout (and the 1 s grace), the dirty blocks written back.
    let mut greedy = handshake(&socket);
    greedy.set_write_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    for cookie in 0..512u64 {
        if greedy.write_all(&request(0, cookie, 0, 1 << 20)).is_err() {
            break;
        }
    }
    let started = std::time::Instant::now();
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(8), "{:?}", started.elapsed());
    let disk = std::fs::read(&backing).unwrap();
    assert!(disk[..65536].iter().all(|&b| b == 0x3c), "written back at the stop");
}

/// Connects to `socket`, reads the greeting and sends the client's flags (fixed newstyle, no
/// zeroes): the handshake waits for the client's first option.
fn greeted(socket: &Path) -> std::os::unix::net::UnixStream {
    let mut client = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let mut greeting = [0u8; 18];
    client.read_exact(&mut greeting).unwrap();
    client.write_all(&3u32.to_be_bytes()).unwrap();
    client
}

/// An NBD option as a client sends it.
fn option(kind: u32, data: &[u8]) -> Vec<u8> {
    let mut b = 0x4948_4156_454F_5054u64.to_be_bytes().to_vec();
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// Sends `bytes` one at a time, `every` apart, until they are sent or the server closes the
/// connection; how long after `since` it was closed, if it was.
fn drip(
    client: &mut std::os::unix::net::UnixStream,
    bytes: &[u8],
    every: std::time::Duration,
    since: std::time::Instant,
) -> Option<std::time::Duration> {
    client.set_nonblocking(true).unwrap();
    let mut sink = [0u8; 1 << 16];
    for byte in bytes {
        std::thread::sleep(every);
        // What the server sent is read past; the end (or a reset) is the close.
        loop {
            match client.read(&mut sink) {
                Ok(0) => return Some(since.elapsed()),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return Some(since.elapsed()),
            }
        }
        if client.write_all(std::slice::from_ref(byte)).is_err() {
            return Some(since.elapsed());
        }
    }
    None
}

/// A legitimate client's handshake and a 4 KiB read, timed.
fn served_within(socket: &Path) -> std::time::Duration {
    let started = std::time::Instant::now();
    let (mut client, _, _) = export(socket);
    client.write_all(&request(0, 7, 0, 4096)).unwrap();
    let mut reply = [0u8; 16 + 4096];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 0, "the read succeeds");
    started.elapsed()
}

/// Deadlines that a trickle cannot stretch (issue 49's first three failures): a handshake
/// dripped a byte at a time, 64 clients that keep their handshakes alive with an option now and
/// then, a request header dripped past the idle timeout, and a client that reads its pipelined
/// replies a little at a time. Each is cut at its deadline, whatever bytes it moves, and a
/// legitimate client is served within 2 seconds while the 64 hold their handshakes.
#[test]
fn deadlines_that_a_trickle_cannot_stretch() {
    use std::time::{Duration, Instant};
    let (_, backing, tier, socket) = fresh("deadlines", 0);
    let more = ["--handshake-timeout", "2", "--request-timeout", "1", "--idle-timeout", "3"];
    let server = serve_with(&backing, &socket, &tier, "wt", &more);
    let tick = Duration::from_millis(300);

    // A handshake dripped a byte every 0.3 s: closed at its 2 s deadline.
    let connected = Instant::now();
    let mut dripper = greeted(&socket);
    let list = option(3, &[]).repeat(4);
    let closed = drip(&mut dripper, &list, tick, connected).expect("a dripped handshake was cut");
    assert!(closed < Duration::from_secs(4), "a dripped handshake lasted {closed:?}");

    // 64 clients each sending NBD_OPT_LIST every 0.3 s, and answered: none outlives the
    // handshake deadline, and while they hold every handshake slot a real client is served.
    let started = Instant::now();
    let listers: Vec<_> = (0..64)
        .map(|_| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut client = greeted(&socket);
                let at = Instant::now();
                drip(&mut client, &option(3, &[]).repeat(40), Duration::from_millis(10), at)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let legitimate = served_within(&socket);
    assert!(legitimate < Duration::from_secs(2), "a real client waited {legitimate:?}");
    for lister in listers {
        let closed = lister.join().unwrap().expect("a lister kept its handshake open");
        assert!(closed < Duration::from_secs(4), "a lister lasted {closed:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(8));

    // A request header dripped a byte every 0.3 s, each byte within the 3 s idle timeout:
    // closed at the request's 1 s deadline.
    let (mut idler, _, _) = export(&socket);
    let at = Instant::now();
    let closed = drip(&mut idler, &request(0, 1, 0, 4096), tick, at).expect("a dripped request");
    assert!(closed < Duration::from_secs(3), "a dripped request lasted {closed:?}");

    // Eight pipelined 4 MiB reads, their replies read 64 KiB every 0.3 s: cut at a reply's
    // 1 s deadline.
    let (mut slow, _, _) = export(&socket);
    for cookie in 0..8 {
        slow.write_all(&request(0, cookie, 0, 4 << 20)).unwrap();
    }
    let at = Instant::now();
    let mut chunk = vec![0u8; 64 << 10];
    let cut = loop {
        std::thread::sleep(tick);
        match slow.read(&mut chunk) {
            Ok(0) | Err(_) => break at.elapsed(),
            Ok(_) if at.elapsed() > Duration::from_secs(20) => panic!("a slow reader was not cut"),
            Ok(_) => {}
        }
    };
    assert!(cut < Duration::from_secs(6), "a slow reader lasted {cut:?}");

    // The server serves on.
    assert!(served_within(&socket) < Duration::from_secs(2));
    assert!(server.stop().success());
}

/// One memory ceiling for the whole server (issue 49's third failure: four clients pipelining
/// large reads and reading their replies a little at a time held 554 MiB, each connection's
/// 256 MiB budget being the only bound). With `--memory-limit 64MiB`, four such clients hold
/// the server's growth under the ceiling, a real client's small read is served meanwhile, and
/// the slow readers are cut at their replies' deadline.
#[test]
fn one_memory_ceiling_over_every_connection() {
    use std::time::{Duration, Instant};
    let (_, backing, tier, socket) = fresh("ceiling", 7);
    let more = ["--memory-limit", "64MiB", "--request-timeout", "4"];
    let server = serve_with(&backing, &socket, &tier, "wt", &more);
    let before = rss(server.child.id());
    let hogs: Vec<_> = (0..4)
        .map(|_| {
            let (mut client, _, _) = export(&socket);
            client.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
            for cookie in 0..64 {
                // Each read of 4 MiB; past what the server reads of them, the writes block.
                if client.write_all(&request(0, cookie, 0, 4 << 20)).is_err() {
                    break;
                }
            }
            client
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let grown = rss(server.child.id()).saturating_sub(before);
    assert!(grown < 96 << 20, "four slow readers grew the server by {grown} bytes");
    let started = Instant::now();
    let (mut client, _, _) = export(&socket);
    client.write_all(&request(0, 1, 0, 4096)).unwrap();
    let mut reply = vec![0u8; 16 + 4096];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 0);
    assert!(reply[16..].iter().all(|&b| b == 7), "the backing file's bytes");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a real read waited {:?}",
        started.elapsed()
    );
    // The hogs, reading a little now and then, are cut at a reply's deadline.
    for mut hog in hogs {
        hog.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut chunk = vec![0u8; 64 << 10];
        let at = Instant::now();
        loop {
            match hog.read(&mut chunk) {
                Ok(0) => break,
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => break,
                _ if at.elapsed() > Duration::from_secs(20) => panic!("a slow reader stayed"),
                _ => std::thread::sleep(Duration::from_millis(300)),
            }
        }
    }
    assert!(server.stop().success());
}

/// Starts `tiercache serve` on a TCP port of loopback with `more` options: the server, and the
/// address it listens on.
fn serve_tcp(backing: &Path, more: &[&str]) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["serve", "--backing", backing.to_str().unwrap(), "--dram", "1MiB"])
        .args(["--listen", "tcp:127.0.0.1:0"])
        .args(more)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let address = loop {
        let line = lines.next().expect("the server logs where it listens").unwrap();
        if let Some(rest) = line.split("listening on tcp:").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, address)
}

/// `--allow` and `--deny` choose TCP clients by address: a client from a network not allowed,
/// or denied, is closed before it gets a byte; one allowed is served (qemu-io over TCP). Lists
/// that do not parse, and lists given for a unix socket, are refused with a message.
#[test]
fn allow_and_deny_choose_tcp_clients_by_address() {
    let (dir, backing, _, socket) = fresh("allow", 0);
    let greeting = |address: &str| -> Option<[u8; 8]> {
        let mut client = std::net::TcpStream::connect(address).unwrap();
        client.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let mut magic = [0u8; 8];
        client.read_exact(&mut magic).ok().map(|()| magic)
    };
    for more in [&["--allow", "10.0.0.0/8"][..], &["--deny", "127.0.0.0/8,::1"]] {
        let (mut child, address) = serve_tcp(&backing, more);
        assert_eq!(greeting(&address), None, "{more:?}: a loopback client got a greeting");
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let (mut child, address) = serve_tcp(&backing, &["--allow", "10.0.0.0/8,127.0.0.1"]);
    assert_eq!(greeting(&address), Some(*b"NBDMAGIC"));
    let out = Command::new("qemu-io")
        .args(["-f", "raw", &format!("nbd://{address}"), "-c", "read -P 0 0 4k"])
        .output()
        .expect("qemu-io");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    child.kill().unwrap();
    child.wait().unwrap();

    let refused = |more: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(["serve", "--backing", backing.to_str().unwrap()])
            .args(more)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{more:?} was served");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let error = refused(&["--listen", "tcp:127.0.0.1:0", "--allow", "10.0.0.0/33"]);
    assert!(error.contains("--allow 10.0.0.0/33"), "{error}");
    let listen = format!("unix:{}", socket.display());
    let error = refused(&["--listen", &listen, "--deny", "10.0.0.0/8"]);
    assert!(error.contains("--socket-mode"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The small holes of issue 49: a write over the advertised maximum is read past, never held
/// (EOVERFLOW, the connection going on); a flag a command does not take is EINVAL; and the
/// server refuses, with a message, a FIFO, a character device or an empty file as its backing,
/// and a socket its owner could not use; /metrics beyond loopback is warned about.
#[test]
fn oversized_writes_odd_flags_and_odd_backings_are_refused() {
    let (dir, backing, tier, socket) = fresh("holes", 0);
    let server = serve(&backing, &socket, &tier, "wt");
    // A 64 MiB write (twice the 32 MiB maximum) past the end: its bytes are read past.
    let before = rss(server.child.id());
    let (mut client, _, _) = export(&socket);
    let mut huge = request(1, 9, SIZE as u64, 64 << 20);
    let zeros = vec![0u8; 1 << 20];
    client.write_all(&huge).unwrap();
    for _ in 0..64 {
        client.write_all(&zeros).unwrap();
    }
    let mut reply = [0u8; 16];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 75, "EOVERFLOW");
    let grown = rss(server.child.id()).saturating_sub(before);
    assert!(grown < 16 << 20, "a refused write was held: {grown} bytes");
    // A read with a flag no command has, and one with NO_HOLE: EINVAL; then a good read.
    for flags in [1u16 << 6, 1 << 1] {
        huge = request(0, 10, 0, 4096);
        huge[4..6].copy_from_slice(&flags.to_be_bytes());
        client.write_all(&huge).unwrap();
        client.read_exact(&mut reply).unwrap();
        assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 22, "flags {flags:#x}");
    }
    client.write_all(&request(0, 11, 0, 512)).unwrap();
    let mut good = [0u8; 16 + 512];
    client.read_exact(&mut good).unwrap();
    assert_eq!(u32::from_be_bytes(good[4..8].try_into().unwrap()), 0, "the connection goes on");
    drop(client);
    assert!(server.stop().success());

    let refused = |backing: &Path, more: &[&str]| -> String {
        let listen = format!("unix:{}", dir.join("other.sock").display());
        let mut args = vec!["serve", "--backing", backing.to_str().unwrap(), "--listen", &listen];
        args.extend(more);
        let mut child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(&args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded: a server that hangs (a FIFO opened for reading) fails the test.
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "{args:?} hangs");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut error = String::new();
        child.stderr.take().unwrap().read_to_string(&mut error).unwrap();
        assert!(!child.wait().unwrap().success(), "{args:?} was served: {error}");
        error
    };
    let fifo = dir.join("fifo");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a path this test owns.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    assert!(refused(&fifo, &[]).contains("a FIFO"));
    assert!(refused(Path::new("/dev/null"), &[]).contains("a character device"));
    let empty = dir.join("empty.img");
    std::fs::write(&empty, b"").unwrap();
    assert!(refused(&empty, &[]).contains("an empty file"));
    let error = refused(&backing, &["--socket-mode", "0"]);
    assert!(error.contains("--socket-mode 0") && error.contains("owner"), "{error}");

    // /metrics on every address: served, with a warning.
    let more = ["--metrics", "0.0.0.0:0"];
    let server = serve_with(&backing, &socket, &tier, "wt", &more);
    assert!(server.log.contains("warning: --metrics 0.0.0.0:0"), "{}", server.log);
    assert!(server.stop().success());
}

/// Out of file descriptors (a limit of 64), with clients still connecting: the accept loop
/// backs off and logs at most once a second instead of spinning, and serves again once
/// descriptors are free.
#[test]
fn out_of_descriptors_the_accept_loop_backs_off() {
    use std::os::unix::process::CommandExt;
    let (_, backing, _, socket) = fresh("emfile", 0);
    let listen = format!("unix:{}", socket.display());
    let mut command = Command::new(env!("CARGO_BIN_EXE_tiercache"));
    command.args(["serve", "--backing", backing.to_str().unwrap(), "--dram", "1MiB"]);
    command.args(["--shards", "2", "--listen", &listen, "--max-connections", "1000"]);
    // SAFETY: setrlimit in the child before exec; nothing else runs there.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = lines.clone();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || stderr.lines().for_each(|l| log.lock().unwrap().push(l.unwrap())));
    while !lines.lock().unwrap().iter().any(|l| l.contains("listening on")) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Each connection costs the server two descriptors or more: 80 exhaust 64.
    let held: Vec<_> =
        (0..80).filter_map(|_| std::os::unix::net::UnixStream::connect(&socket).ok()).collect();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let failures = lines.lock().unwrap().iter().filter(|l| l.contains("accept failed")).count();
    assert!((1..=4).contains(&failures), "{failures} lines: {:?}", lines.lock().unwrap());
    drop(held);
    let later = Default::default();
    let server = Server { child, socket: socket.clone(), log: String::new(), later };
    std::thread::sleep(std::time::Duration::from_millis(500));
    qemu_io(&server, &["write -P 0x11 0 4k", "read -P 0x11 0 4k"]);
    assert!(server.stop().success());
}

/// `--read-only`: the export says so (NBD_FLAG_READ_ONLY); reads are served, writes, trims and
/// zeroes refused with EPERM, the backing file untouched; qemu-io reads it. A write-back cache
/// is refused with it (its dirty blocks could never be written back).
#[test]
fn a_read_only_export_serves_reads_and_refuses_writes() {
    let (dir, backing, tier, socket) = fresh("read-only", 0x42);
    let refused_tier = dir.join("refused.mem");
    let tier_s = refused_tier.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["serve", "--backing", backing.to_str().unwrap(), "--dram", "0", "--slow-path"])
        .args([tier_s, "--slow-size", "2MiB", "--mode", "wb", "--read-only", "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && error.contains("read-only") && error.contains("dirty"),
        "{error}"
    );
    let server = serve_with(&backing, &socket, &tier, "wt", &["--read-only"]);
    assert!(server.log.contains("read-only"), "{}", server.log);
    let (mut client, _, flags) = export(&socket);
    assert_ne!(flags & 2, 0, "NBD_FLAG_READ_ONLY: {flags:#x}");
    let mut reply = [0u8; 16];
    let error_of = |reply: &[u8; 16]| u32::from_be_bytes(reply[4..8].try_into().unwrap());
    client.write_all(&request(1, 1, 0, 4096)).unwrap();
    client.write_all(&[0x99; 4096]).unwrap();
    client.read_exact(&mut reply).unwrap();
    assert_eq!(error_of(&reply), 1, "EPERM for a write");
    for (cookie, kind) in [(2, 4), (3, 6)] {
        client.write_all(&request(kind, cookie, 0, 4096)).unwrap();
        client.read_exact(&mut reply).unwrap();
        assert_eq!(error_of(&reply), 1, "EPERM for command {kind}");
    }
    client.write_all(&request(0, 4, 0, 4096)).unwrap();
    client.read_exact(&mut reply).unwrap();
    assert_eq!(error_of(&reply), 0, "a read is served");
    let mut data = vec![0u8; 4096];
    client.read_exact(&mut data).unwrap();
    assert!(data.iter().all(|&b| b == 0x42));
    drop(client);
    let read = Command::new("qemu-io")
        .args(["-r", "-f", "raw", &server.uri(), "-c", "read -P 0x42 0 64k"])
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    assert!(server.stop().success());
    assert!(std::fs::read(&backing).unwrap().iter().all(|&b| b == 0x42), "untouched");
}

/// Makes, in `dir`, a certificate authority, a server certificate for `localhost` and a client
/// certificate, both signed by it (openssl): `ca-cert.pem`, `server-cert.pem`,
/// `server-key.pem`, and the client's credentials in the layout QEMU's `tls-creds-x509` and
/// libnbd's `tls-certificates` read: `client/` (CA, certificate, key) and `no-client/` (the CA
/// alone).
fn certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let new_key = ["-newkey", "rsa:2048", "-nodes", "-keyout"];
    let ca = ["ca-key.pem", "-out", "ca-cert.pem", "-days", "2", "-subj", "/CN=tiercache test CA"];
    openssl(&[&["req", "-x509"][..], &new_key, &ca].concat());
    let server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
    let client_ext = "extendedKeyUsage=clientAuth\n";
    let signed = [
        ("server", "/CN=localhost", server_ext),
        ("client", "/CN=client", client_ext),
        ("intruder", "/CN=intruder/O=Elsewhere", client_ext),
    ];
    for (name, subject, ext) in signed {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let [key, csr, cert, ext] =
            ["-key.pem", ".csr", "-cert.pem", ".ext"].map(|s| name.to_string() + s);
        openssl(&[&["req"][..], &new_key, &[&key, "-out", &csr, "-subj", subject]].concat());
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca-cert.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            &ext,
        ]);
    }
    // The intruder's certificate revoked, in a CRL of the CA's.
    let ca_config = "[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\n\
                     crlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 2\n\
                     certificate = ca-cert.pem\nprivate_key = ca-key.pem\n";
    std::fs::write(dir.join("ca.cnf"), ca_config).unwrap();
    std::fs::write(dir.join("index.txt"), "").unwrap();
    std::fs::write(dir.join("crlnumber"), "01\n").unwrap();
    openssl(&["ca", "-config", "ca.cnf", "-revoke", "intruder-cert.pem"]);
    openssl(&["ca", "-config", "ca.cnf", "-gencrl", "-out", "crl.pem"]);
    // Directories of client credentials as QEMU reads them (tls-creds-x509's dir).
    for (sub, key) in
        [("client", Some("client")), ("intruder", Some("intruder")), ("no-client", None)]
    {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::copy(dir.join("ca-cert.pem"), dir.join(sub).join("ca-cert.pem")).unwrap();
        if let Some(key) = key {
            for part in ["cert", "key"] {
                let from = dir.join(format!("{key}-{part}.pem"));
                std::fs::copy(from, dir.join(sub).join(format!("client-{part}.pem"))).unwrap();
            }
        }
    }
}

/// The server's options for TLS with the certificates of `certificates(dir)`: its certificate
/// and key, and the CA that signs its clients'.
fn tls_options(dir: &Path) -> [String; 6] {
    let pem = |name: &str| dir.join(name).to_str().unwrap().to_string();
    [
        "--tls-cert".to_string(),
        pem("server-cert.pem"),
        "--tls-key".into(),
        pem("server-key.pem"),
        "--tls-client-ca".into(),
        pem("ca-cert.pem"),
    ]
}

/// QEMU's options for a TLS export on `socket` with the client credentials in `creds`.
fn tls_image(socket: &Path, creds: &Path) -> [String; 4] {
    [
        "--object".into(),
        format!("tls-creds-x509,id=tls0,endpoint=client,dir={}", creds.display()),
        "--image-opts".into(),
        format!(
            "driver=nbd,server.type=unix,server.path={},tls-creds=tls0,tls-hostname=localhost",
            socket.display()
        ),
    ]
}

/// Runs `program ARGS`: whether it succeeded, and what it printed.
fn client(program: &str, args: &[String]) -> (bool, String) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("{program}: {e} (scripts/test installs qemu-utils and libnbd-bin)")
    });
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// TLS with client certificates, with real clients: qemu-io writes and reads, qemu-img copies
/// the export out, and nbdinfo reads it, each through `nbds` with a client certificate; a
/// plain client and a client without a certificate are refused; before STARTTLS every option
/// gets NBD_REP_ERR_TLS_REQD and NBD_OPT_EXPORT_NAME closes the connection. The same TLS
/// settings from a config file's `[serve]` table make a read-only export that serves reads and
/// refuses a write; with TLS, a TCP address off loopback is taken.
#[test]
fn tls_exports_admit_only_clients_with_a_certificate() {
    let (dir, backing, tier, socket) = fresh("tls", 0);
    certificates(&dir);
    let pem = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let tls = tls_options(&dir);
    let more: Vec<&str> = tls.iter().map(String::as_str).collect();
    let server = serve_with(&backing, &socket, &tier, "wb", &more);
    assert!(server.log.contains("with TLS and client certificates"), "{}", server.log);
    let image = tls_image(&socket, &dir.join("client"));
    let write =
        ["-c".into(), "write -P 0xab 4096 1M".into(), "-c".into(), "read -P 0xab 4096 1M".into()];
    let (ok, text) = client("qemu-io", &[&image[..], &write].concat());
    assert!(ok && !text.contains("fail"), "qemu-io over TLS: {text}");
    let copy = dir.join("copy.img");
    let convert = ["convert".into(), image[0].clone(), image[1].clone(), image[2].clone()];
    let convert = [&convert[..], &[image[3].clone(), "-O".into(), "raw".into()]].concat();
    let (ok, text) = client("qemu-img", &[&convert[..], &[copy.to_str().unwrap().into()]].concat());
    assert!(ok, "qemu-img convert over TLS: {text}");
    let copied = std::fs::read(&copy).unwrap();
    assert_eq!(copied.len(), SIZE);
    assert!(copied[4096..4096 + (1 << 20)].iter().all(|&b| b == 0xab), "the write read back");
    assert!(
        copied[..4096].iter().all(|&b| b == 0)
            && copied[4096 + (1 << 20)..].iter().all(|&b| b == 0)
    );
    let uri = format!(
        "nbds+unix:///?socket={}&tls-certificates={}&tls-hostname=localhost",
        socket.display(),
        dir.join("client").display()
    );
    let (ok, text) = client("nbdinfo", &[uri]);
    assert!(ok && text.contains("with TLS") && text.contains(&SIZE.to_string()), "nbdinfo: {text}");
    // Refused: a plain client, and a client without a certificate.
    let (ok, text) = client(
        "qemu-io",
        &["-f".into(), "raw".into(), server.uri(), "-c".into(), "read 0 4k".into()],
    );
    assert!(!ok && text.contains("TLS"), "a plain client: {text}");
    let log = server.logs("without TLS");
    assert!(log.contains("asked for NBD_OPT_") && log.contains("without TLS"), "why: {log}");
    let no_cert = tls_image(&socket, &dir.join("no-client"));
    let (ok, text) =
        client("qemu-io", &[&no_cert[..], &["-c".into(), "read 0 4k".into()]].concat());
    assert!(!ok, "a client without a certificate: {text}");
    // The protocol, by hand: options before STARTTLS are refused, EXPORT_NAME closes.
    let mut plain = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut greeting = [0u8; 18];
    plain.read_exact(&mut greeting).unwrap();
    plain.write_all(&3u32.to_be_bytes()).unwrap();
    let option = |kind: u32| {
        [&0x4948_4156_454F_5054u64.to_be_bytes()[..], &kind.to_be_bytes(), &0u32.to_be_bytes()]
            .concat()
    };
    plain.write_all(&option(3)).unwrap(); // NBD_OPT_LIST
    let mut reply = [0u8; 20];
    plain.read_exact(&mut reply).unwrap();
    assert_eq!(u32::from_be_bytes(reply[12..16].try_into().unwrap()), (1 << 31) + 5, "TLS_REQD");
    plain.write_all(&option(1)).unwrap(); // NBD_OPT_EXPORT_NAME
    assert!(closed_within(&mut plain, 5.0), "EXPORT_NAME without TLS closes");
    assert!(server.stop().success());
    assert!(
        std::fs::read(&backing).unwrap()[4096..8192].iter().all(|&b| b == 0xab),
        "written back"
    );

    // From a config file: read-only, TLS, client certificates.
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[serve]\nbacking = \"backing.img\"\nlisten = \"unix:{}\"\nread_only = true\n\
             tls_cert = \"server-cert.pem\"\ntls_key = \"server-key.pem\"\n\
             tls_client_ca = \"ca-cert.pem\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let server = start(&["--config", config.to_str().unwrap()], &socket);
    assert!(
        server.log.contains("with TLS and client certificates") && server.log.contains("read-only"),
        "{}",
        server.log
    );
    let (ok, text) = client(
        "qemu-io",
        &[&["-r".into()], &image[..], &["-c".into(), "read -P 0xab 4096 64k".into()]].concat(),
    );
    assert!(ok && !text.contains("fail"), "a read over read-only TLS: {text}");
    let (ok, text) =
        client("qemu-io", &[&image[..], &["-c".into(), "write -P 0x11 0 4k".into()]].concat());
    assert!(!ok || text.contains("failed"), "a write to a read-only export: {text}");
    assert!(server.stop().success());
    assert!(std::fs::read(&backing).unwrap()[..4096].iter().all(|&b| b == 0), "not written");

    // TLS settings that do not go together are refused, naming the option; with TLS, a TCP
    // address off loopback is taken.
    let refused = |args: &[&str]| {
        let out =
            Command::new(env!("CARGO_BIN_EXE_tiercache")).arg("serve").args(args).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let base = ["--backing", backing.to_str().unwrap(), "--listen", "tcp:0.0.0.0:0"];
    let error = refused(&[&base[..], &["--tls-cert", &pem("server-cert.pem")]].concat());
    assert!(error.contains("--tls-key"), "{error}");
    let error = refused(
        &[&base[..], &["--tls-cert", &pem("server-cert.pem"), "--tls-key", &pem("ca-cert.pem")]]
            .concat(),
    );
    assert!(error.contains("--tls-key") && error.contains("ca-cert.pem"), "{error}");
    let error = refused(&base);
    assert!(error.contains("--tls-cert") && error.contains("--insecure-no-tls"), "{error}");
    let server = start(&[&base[..], &more].concat(), &socket);
    assert!(
        server.log.contains("listening on tcp:0.0.0.0:") && server.log.contains("with TLS"),
        "{}",
        server.log
    );
    assert!(server.stop().success());
}

/// `qemu-img map --output=json` of the export: (start, length, data) of each extent.
fn qemu_map(server: &Server) -> Vec<(u64, u64, bool)> {
    let (ok, text) = client("qemu-img", &["map".into(), "--output=json".into(), server.uri()]);
    assert!(ok, "qemu-img map: {text}");
    let extents: Vec<serde_json::Value> = serde_json::from_str(&text).expect("qemu-img's JSON");
    let number = |e: &serde_json::Value, key: &str| e[key].as_u64().expect(key);
    let extents: Vec<_> = extents
        .iter()
        .map(|e| {
            let data = e["data"].as_bool().expect("data");
            assert_eq!(e["zero"].as_bool(), Some(!data), "a hole reads as zeros: {text}");
            (number(e, "start"), number(e, "length"), data)
        })
        .collect();
    merged(extents)
}

/// `nbdinfo --map` of the export: (start, length, data) of each extent.
fn nbdinfo_map(server: &Server) -> Vec<(u64, u64, bool)> {
    let (ok, text) = client("nbdinfo", &["--map".into(), server.uri()]);
    assert!(ok, "nbdinfo --map: {text}");
    let extents = text
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let number = |i: usize| words[i].parse::<u64>().unwrap_or_else(|_| panic!("{text}"));
            // Type 0 is data; 3 is a hole that reads as zeros.
            assert!(matches!(number(2), 0 | 3), "{text}");
            (number(0), number(1), number(2) == 0)
        })
        .collect();
    merged(extents)
}

/// Extents with each run of alike ones made one.
fn merged(extents: Vec<(u64, u64, bool)>) -> Vec<(u64, u64, bool)> {
    let mut out: Vec<(u64, u64, bool)> = Vec::new();
    for (start, len, data) in extents {
        match out.last_mut() {
            Some(last) if last.2 == data && last.0 + last.1 == start => last.1 += len,
            _ => out.push((start, len, data)),
        }
    }
    out
}

/// Holes show through the cache: over a sparse backing file, `qemu-img map` and `nbdinfo
/// --map` (structured replies, `base:allocation`, BLOCK_STATUS) find the data and the holes;
/// a block written and still dirty in the cache is data where the backing file has a hole; a
/// range trimmed, or zeroed fast, is a hole again. A CACHE request loads its blocks into the
/// cache; WRITE_ZEROES that must be fast and may not punch a hole is refused (ENOTSUP).
#[test]
fn holes_show_through_the_cache_and_cache_requests_prefetch() {
    use std::os::unix::fs::FileExt;
    const MIB: u64 = 1 << 20;
    let (_, backing, tier, socket) = fresh("holes", 0);
    let file = std::fs::File::create(&backing).unwrap();
    file.set_len(SIZE as u64).unwrap();
    file.write_all_at(&vec![7u8; MIB as usize], 2 * MIB).unwrap();
    file.sync_all().unwrap();
    drop(file);
    let more = ["--metrics", "127.0.0.1:0", "--block-size", "4KiB"];
    let server = serve_with(&backing, &socket, &tier, "wb", &more);
    let size = SIZE as u64;
    let expected =
        vec![(0, 2 * MIB, false), (2 * MIB, MIB, true), (3 * MIB, size - 3 * MIB, false)];
    assert_eq!(qemu_map(&server), expected, "the backing file's holes");
    assert_eq!(nbdinfo_map(&server), expected);

    // Written back later: dirty in the cache, a hole on the backing file, and data to clients.
    qemu_io(&server, &["write -P 0x05 6M 64k"]);
    let expected = vec![
        (0, 2 * MIB, false),
        (2 * MIB, MIB, true),
        (3 * MIB, 3 * MIB, false),
        (6 * MIB, 64 << 10, true),
        (6 * MIB + (64 << 10), 2 * MIB - (64 << 10), false),
    ];
    assert_eq!(qemu_map(&server), expected, "a dirty block is data");
    assert_eq!(nbdinfo_map(&server), expected);

    // A trim punches the hole again.
    let (ok, text) = client(
        "qemu-io",
        &["-d", "unmap", "-f", "raw", &server.uri(), "-c", "discard 2M 1M"].map(String::from),
    );
    assert!(ok && !text.contains("fail"), "qemu-io discard: {text}");
    let expected = vec![
        (0, 6 * MIB, false),
        (6 * MIB, 64 << 10, true),
        (6 * MIB + (64 << 10), 2 * MIB - (64 << 10), false),
    ];
    assert_eq!(qemu_map(&server), expected, "trimmed");

    // By hand: CACHE loads blocks, and fast zeroes punch or are refused.
    let address = server
        .log
        .lines()
        .find_map(|l| l.split("metrics on http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("the server logs its metrics address")
        .to_string();
    let resident = || -> u64 {
        let mut http = std::net::TcpStream::connect(&address).unwrap();
        http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut response = String::new();
        http.read_to_string(&mut response).unwrap();
        let line = response.lines().find(|l| l.starts_with("tiercache_resident_blocks ")).unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (mut client, _, flags) = export(&socket);
    assert_eq!(flags & (1 << 10 | 1 << 11), 1 << 10 | 1 << 11, "CACHE and FAST_ZERO: {flags:#x}");
    let before = resident();
    client.write_all(&request(5, 1, 4 * MIB, 256 << 10)).unwrap(); // NBD_CMD_CACHE
    let mut reply = [0u8; 16];
    client.read_exact(&mut reply).unwrap();
    assert_eq!((&reply[4..8], &reply[8..16]), (&[0u8; 4][..], &1u64.to_be_bytes()[..]));
    assert_eq!(resident(), before + 64, "256 KiB of 4 KiB blocks loaded");
    let zeroes = |cookie: u64, flags: u16| {
        let mut header = request(6, cookie, 6 * MIB, 64 << 10); // NBD_CMD_WRITE_ZEROES
        header[4..6].copy_from_slice(&flags.to_be_bytes());
        header
    };
    client.write_all(&zeroes(2, 1 << 4 | 1 << 1)).unwrap(); // FAST_ZERO and NO_HOLE
    client.read_exact(&mut reply).unwrap();
    assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 95, "ENOTSUP");
    assert!(qemu_map(&server).contains(&(6 * MIB, 64 << 10, true)), "nothing was zeroed");
    client.write_all(&zeroes(3, 1 << 4)).unwrap(); // FAST_ZERO: a hole punched
    client.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[4..8], &[0u8; 4]);
    assert_eq!(qemu_map(&server), vec![(0, size, false)], "zeroed fast: all holes");
    qemu_io(&server, &["read -P 0 0 8M"]);
    assert!(server.stop().success());
}

/// Who may connect, by certificate: with `--tls-authz`, only clients whose certificate's
/// subject is listed (RFC 4514's form, as a value or in a file); with `--tls-crl`, not those
/// whose certificate the CA revoked. The refused client gets no export; the admitted one reads
/// and writes it.
#[test]
fn tls_authz_and_crl_choose_clients_by_certificate() {
    let (dir, backing, tier, socket) = fresh("authz", 0);
    certificates(&dir);
    let pem = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let tls = tls_options(&dir);
    let io = |creds: &str| {
        let image = tls_image(&socket, &dir.join(creds));
        client("qemu-io", &[&image[..], &["-c".into(), "write -P 0x3c 0 64k".into()]].concat())
    };
    let authz = dir.join("authz.txt");
    std::fs::write(&authz, "# who may connect\n\nO=Elsewhere,CN=someone else\nCN=client\n")
        .unwrap();
    let by_file = format!("@{}", authz.display());
    for choice in [&["--tls-authz", "CN=client"][..], &["--tls-authz", &by_file]] {
        let more: Vec<&str> =
            tls.iter().map(String::as_str).chain(choice.iter().copied()).collect();
        let server = serve_with(&backing, &socket, &tier, "wt", &more);
        assert!(server.log.contains("named in --tls-authz"), "{}", server.log);
        let (ok, text) = io("client");
        assert!(ok && !text.contains("fail"), "a client named in --tls-authz: {text}");
        let (ok, text) = io("intruder");
        assert!(!ok, "a client not named in --tls-authz, its certificate signed: {text}");
        assert!(server.stop().success());
    }
    // Named (as RFC 4514 writes its subject: the last name first), and admitted; then
    // revoked, and refused.
    let crl = pem("crl.pem");
    let named = ["--tls-authz", "O=Elsewhere,CN=intruder"];
    let more: Vec<&str> = tls.iter().map(String::as_str).chain(named).collect();
    let server = serve_with(&backing, &socket, &tier, "wt", &more);
    let (ok, text) = io("intruder");
    assert!(ok && !text.contains("fail"), "a client named in --tls-authz: {text}");
    assert!(server.stop().success());
    let more: Vec<&str> = more.into_iter().chain(["--tls-crl", crl.as_str()]).collect();
    let server = serve_with(&backing, &socket, &tier, "wt", &more);
    let (ok, text) = io("intruder");
    assert!(!ok, "a revoked certificate: {text}");
    assert!(server.stop().success());
    let more: Vec<&str> = tls.iter().map(String::as_str).chain(["--tls-crl", &crl]).collect();
    let server = serve_with(&backing, &socket, &tier, "wt", &more);
    let (ok, text) = io("client");
    assert!(ok && !text.contains("fail"), "a certificate the CRL does not revoke: {text}");
    assert!(server.stop().success());
    // Without a CA to check certificates against, neither option means anything: refused.
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["serve", "--backing", backing.to_str().unwrap(), "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .args(&tls[..4])
        .args(["--tls-authz", "CN=client"])
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("--tls-client-ca"), "{error}");
}

/// Several exports from one server, each its own backing file and cache, chosen by name: from
/// the command line (`--backing` and `--export NAME=PATH,read-only`) and from a config file's
/// `[[export]]` tables (each with its own tier file); nbdinfo lists them with their sizes and
/// modes, qemu-io writes one and reads the other, a write to the read-only one is refused, and
/// the empty name is the first export. Exports that would share a name, a backing file or a
/// tier file are refused, and so is a server option in an export's table.
#[test]
fn several_exports_from_one_server_each_with_its_cache() {
    let (dir, backing, tier, socket) = fresh("exports", 0);
    let second = dir.join("b.img");
    std::fs::write(&second, vec![0x42u8; SIZE / 2]).unwrap();
    let more = format!("b={},read-only", second.display());
    let server = serve_with(&backing, &socket, &tier, "wb", &["--export", &more]);
    assert!(server.log.contains("exports 'tiercache', 'b'"), "{}", server.log);
    let (ok, list) = client("nbdinfo", &["--list".into(), server.uri()]);
    assert!(ok, "{list}");
    let b = list.split("export=\"b\"").nth(1).unwrap_or_else(|| panic!("{list}"));
    assert!(b.contains(&format!("export-size: {}", SIZE / 2)), "{list}");
    assert!(b.contains("is_read_only: true"), "{list}");
    let a = list.split("export=\"b\"").next().unwrap();
    assert!(a.contains("export=\"tiercache\"") && a.contains("is_read_only: false"), "{list}");
    let uri_b = format!("nbd+unix:///b?socket={}", socket.display());
    let read_b = ["-r", "-f", "raw", &uri_b, "-c", "read -P 0x42 0 64k"].map(String::from);
    let (ok, text) = client("qemu-io", &read_b);
    assert!(ok && !text.contains("fail"), "{text}");
    let write_b = ["-f", "raw", &uri_b, "-c", "write -P 0x11 0 4k"].map(String::from);
    let (ok, text) = client("qemu-io", &write_b);
    assert!(!ok || text.contains("failed"), "a write to the read-only export: {text}");
    // The default export (the empty name) and the one named tiercache are --backing's.
    qemu_io(&server, &["write -P 0x77 0 64k"]);
    let uri_a = format!("nbd+unix:///tiercache?socket={}", socket.display());
    let (ok, text) =
        client("qemu-io", &["-f", "raw", &uri_a, "-c", "read -P 0x77 0 64k"].map(String::from));
    assert!(ok && !text.contains("fail"), "{text}");
    let (ok, text) = client("nbdinfo", &[format!("nbd+unix:///nope?socket={}", socket.display())]);
    assert!(!ok, "an export no one serves: {text}");
    assert!(server.stop().success());
    assert!(std::fs::read(&backing).unwrap()[..65536].iter().all(|&x| x == 0x77), "written back");
    assert!(std::fs::read(&second).unwrap().iter().all(|&x| x == 0x42), "b untouched");

    // From a config file: two [[export]] tables, one with its own tier file, no --backing.
    let config = dir.join("exports.toml");
    let write = |text: &str| std::fs::write(&config, text).unwrap();
    let head = format!("[serve]\nlisten = \"unix:{}\"\nshards = 2\n", socket.display());
    let x = "[[export]]\nname = \"x\"\nbacking = \"backing.img\"\nslow_path = \"x.tier\"\n\
             slow_size = \"2MiB\"\ndram = \"0\"\nmode = \"wb\"\n";
    let y = "[[export]]\nname = \"y\"\nbacking = \"b.img\"\nread_only = true\n";
    write(&format!("{head}{x}{y}"));
    let server = start(&["--config", config.to_str().unwrap()], &socket);
    assert!(
        server.log.contains("exports 'x', 'y'") && server.log.contains("mode wb"),
        "{}",
        server.log
    );
    qemu_io(&server, &["write -P 0x55 4096 8k", "read -P 0x55 4096 8k"]);
    let uri_y = format!("nbd+unix:///y?socket={}", socket.display());
    let (ok, text) = client(
        "qemu-io",
        &["-r", "-f", "raw", &uri_y, "-c", "read -P 0x42 0 4k"].map(String::from),
    );
    assert!(ok && !text.contains("fail"), "{text}");
    assert!(server.stop().success());
    assert!(std::fs::read(&backing).unwrap()[4096..12288].iter().all(|&x| x == 0x55));
    assert!(dir.join("x.tier").exists(), "x's own tier file");

    // Refused, each naming what is wrong.
    let refused = |text: &str| {
        write(text);
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(["serve", "--config", config.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let error = refused(&format!("{head}{x}{x}"));
    assert!(error.contains("'x' is named twice"), "{error}");
    let error = refused(&format!("{head}{y}{}", y.replace("\"y\"", "\"z\"")));
    assert!(error.contains("one backing file"), "{error}");
    let error = refused(&format!(
        "{head}{x}{}",
        x.replace("\"x\"", "\"w\"").replace("backing.img", "b.img")
    ));
    assert!(error.contains("one tier file"), "{error}");
    let error = refused(&format!("{head}{y}listen = \"unix:/tmp/elsewhere\"\n"));
    assert!(error.contains("listen is the server's"), "{error}");
}

/// systemd socket activation: started with a listening socket as descriptor 3 and
/// `LISTEN_PID` and `LISTEN_FDS` saying so (as systemd starts a service of a `.socket` unit),
/// the server serves on it without `--listen`, and leaves the socket file, the unit's, when it
/// stops. Variables meant for another process are not taken; two sockets are refused.
#[test]
fn socket_activation_serves_on_the_socket_systemd_passes() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (_, backing, _, socket) = fresh("activation", 0x21);
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let fd = listener.as_raw_fd();
    let activated = |fds: &str| {
        let mut command = Command::new("sh");
        // The shell's pid is the server's once it execs: LISTEN_PID names it.
        command.args(["-c", &format!("LISTEN_PID=$$ LISTEN_FDS={fds} exec \"$0\" \"$@\"")]);
        command.arg(env!("CARGO_BIN_EXE_tiercache"));
        command.args(["serve", "--backing", backing.to_str().unwrap(), "--dram", "4MiB"]);
        // SAFETY: dup2 and fcntl are async-signal-safe; the child makes no other call before
        // exec. Descriptor 3 kept open across exec: a copy of the listener, or the listener
        // itself (if it is 3) with its close-on-exec flag cleared.
        unsafe {
            command.pre_exec(move || {
                let done = match fd {
                    3 => libc::fcntl(3, libc::F_SETFD, 0),
                    _ => libc::dup2(fd, 3),
                };
                match done {
                    -1 => Err(std::io::Error::last_os_error()),
                    _ => Ok(()),
                }
            })
        };
        command
    };
    let server = start_command(activated("1"), &socket);
    assert!(
        server.log.contains(&format!("listening on unix:{}", socket.display())),
        "{}",
        server.log
    );
    qemu_io(&server, &["read -P 0x21 0 64k", "write -P 0x22 0 4k", "read -P 0x22 0 4k"]);
    assert!(server.stop().success());
    assert!(socket.exists(), "the socket is the unit's: left in place");
    assert!(std::fs::read(&backing).unwrap()[..4096].iter().all(|&b| b == 0x22));
    let out = activated("2").stderr(Stdio::piped()).output().unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("LISTEN_FDS=2"), "{error}");
    // LISTEN_PID of another process: the variables are not this one's, and --listen is needed.
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["serve", "--backing", backing.to_str().unwrap()])
        .env("LISTEN_PID", "1")
        .env("LISTEN_FDS", "1")
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("--listen"), "{error}");
    drop(listener);

    // systemd's own tool: it listens, and on the first connection execs the server with the
    // socket (scripts/test installs it with systemd).
    let _ = std::fs::remove_file(&socket);
    let activator = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .arg(env!("CARGO_BIN_EXE_tiercache"))
        .args(["serve", "--backing", backing.to_str().unwrap(), "--dram", "4MiB"])
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate (scripts/test installs systemd)");
    let started = std::time::Instant::now();
    while !socket.exists() && started.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let later = Default::default();
    let server = Server { child: activator, socket: socket.clone(), log: String::new(), later };
    qemu_io(&server, &["read -P 0x22 0 4k", "read -P 0x21 4k 60k"]);
    // The server took the activator's pid (it execs): stopping it stops the server.
    assert!(server.stop().success());
}

/// TLS with pre-shared keys (`--tls-psk`, psktool's `identity:hex key` file), with real
/// clients: qemu-io through `tls-creds-psk` writes and reads, nbdinfo through `tls-psk-file`
/// reads; a client with the wrong key, an identity not in the file, and a plain client are
/// refused. A keys file that is not one is an error naming its line; keys with certificates,
/// an error naming both.
#[test]
fn tls_psk_admits_only_clients_with_a_key() {
    let (dir, backing, tier, socket) = fresh("psk", 0);
    let key = |seed: u8| {
        (0..32u8).map(|i| format!("{:02x}", i.wrapping_mul(7) ^ seed)).collect::<String>()
    };
    for (sub, seed) in [("right", 1u8), ("wrong", 2)] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::write(dir.join(sub).join("keys.psk"), format!("alice:{}\n", key(seed))).unwrap();
    }
    let keys = dir.join("right").join("keys.psk");
    let server = serve_with(&backing, &socket, &tier, "wt", &["--tls-psk", keys.to_str().unwrap()]);
    assert!(server.log.contains("with TLS-PSK"), "{}", server.log);
    let qemu = |creds: &str, commands: &[&str]| {
        let mut args = vec![
            "--object".to_string(),
            format!(
                "tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice",
                dir.join(creds).display()
            ),
            "--image-opts".into(),
            format!("driver=nbd,server.type=unix,server.path={},tls-creds=tls0", socket.display()),
        ];
        for c in commands {
            args.extend(["-c".to_string(), c.to_string()]);
        }
        client("qemu-io", &args)
    };
    let (ok, text) = qemu("right", &["write -P 0x6b 0 64k", "read -P 0x6b 0 64k"]);
    assert!(ok && !text.contains("fail"), "qemu-io with the key: {text}");
    let uri = |user: &str, keys: &Path| {
        format!("nbds+unix://{user}@/?socket={}&tls-psk-file={}", socket.display(), keys.display())
    };
    let (ok, text) = client("nbdinfo", &[uri("alice", &keys)]);
    assert!(ok && text.contains("with TLS") && text.contains(&SIZE.to_string()), "nbdinfo: {text}");
    let (ok, text) = qemu("wrong", &["read 0 4k"]);
    assert!(!ok, "the wrong key: {text}");
    let (ok, text) = client("nbdinfo", &[uri("alice", &dir.join("wrong").join("keys.psk"))]);
    assert!(!ok, "the wrong key: {text}");
    std::fs::write(dir.join("bob.psk"), format!("bob:{}\n", key(1))).unwrap();
    let (ok, text) = client("nbdinfo", &[uri("bob", &dir.join("bob.psk"))]);
    assert!(!ok, "an identity not in the file: {text}");
    let plain = ["-f", "raw", &server.uri(), "-c", "read 0 4k"].map(String::from);
    let (ok, text) = client("qemu-io", &plain);
    assert!(!ok && text.contains("TLS"), "a plain client: {text}");
    assert!(server.stop().success());
    assert!(std::fs::read(&backing).unwrap()[..65536].iter().all(|&b| b == 0x6b));

    let refused = |more: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(["serve", "--backing", backing.to_str().unwrap(), "--listen"])
            .arg(format!("unix:{}", socket.display()))
            .args(more)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let bad = dir.join("bad.psk");
    std::fs::write(&bad, format!("alice:{}\nbob=0011\n", key(1))).unwrap();
    let error = refused(&["--tls-psk", bad.to_str().unwrap()]);
    assert!(error.contains("line 2") && error.contains("identity:key"), "{error}");
    let error = refused(&["--tls-psk", keys.to_str().unwrap(), "--tls-cert", "x.pem"]);
    assert!(error.contains("--tls-psk with --tls-cert"), "{error}");
}
