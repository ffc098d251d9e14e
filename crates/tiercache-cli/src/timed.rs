//! `tiercache sim --clients N`: the policy on modeled devices in virtual time.

use tiercache_core::format_size;
use tiercache_sim::timed::TimedReport;

pub fn print(r: &TimedReport, trace: &std::path::Path) {
    match r.arrival_rate {
        Some(rate) => println!("trace     {}   open loop, {rate} requests/s", trace.display()),
        None => println!("trace     {}   clients {}", trace.display(), r.clients),
    }
    println!(
        "{} requests in {:.3} virtual s: {:.0} ops/s   hit ratio {:.2}%",
        r.requests,
        r.virtual_seconds,
        r.ops_per_second,
        r.hit_ratio * 100.0
    );
    println!("latency us     count     mean      p50      p95      p99");
    for (name, l) in [("reads", &r.reads), ("writes", &r.writes)] {
        println!(
            "{name:<10} {:>9} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            l.count, l.mean_us, l.p50_us, l.p95_us, l.p99_us
        );
    }
    if let Some(last) = r.series.last().filter(|p| !p.knobs.is_empty()) {
        let knobs: Vec<String> = last.knobs.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
        println!("knobs at the end: {}", knobs.join(", "));
    }
    for d in &r.devices {
        println!(
            "device {:<12} utilization {:>6.1}%   read {:>10}   written {:>10}",
            d.name,
            d.utilization * 100.0,
            format_size(d.bytes_read),
            format_size(d.bytes_written)
        );
    }
}
