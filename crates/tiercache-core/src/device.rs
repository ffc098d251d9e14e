//! Device profiles: what a medium costs per operation, as data. The simulator computes time
//! from them; the engine can make any real medium behave like one (emulation). Numbers come
//! from the papers' device tables, each cited; where no paper gives a number, it is marked as
//! our assumption.
//!
//! - Latency, bandwidth: Wu et al. (Orthus, FAST'21), Table 1.
//! - Cost per GB relative to DRAM: Kassa et al. (ATC'21), Table 1 (DRAM 1, SCM 0.38, flash
//!   0.017); Orthus Table 1's $/GB for the others, divided by its DRAM price (~$7/GB).
//! - Reads slowed by concurrent writers: Fedorova et al. ("Writes Hurt", SoCC'22), Figure 2 and
//!   section 2: Optane reads fall from 12 to 3.4 GB/s with one writer and to 0.8 GB/s with
//!   eight; DRAM loses 18% and 35%.

use serde::{Deserialize, Serialize};

use crate::limits::{
    PROFILE_BANDWIDTH_GB_S, PROFILE_CONTENTION_MAX, PROFILE_LATENCY_US_MAX, PROFILE_PARALLELISM_MAX,
};

/// How a device serves operations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    pub name: String,
    pub read_latency_us: f64,
    pub write_latency_us: f64,
    /// Aggregate bandwidth with enough operations in flight, in GB/s (10^9 bytes).
    pub read_bandwidth_gb_s: f64,
    pub write_bandwidth_gb_s: f64,
    /// Operations the device serves at once; each gets a 1/parallelism share of bandwidth.
    pub parallelism: u32,
    /// Fraction of read bandwidth left with one concurrent writer.
    pub read_share_one_writer: f64,
    /// Fraction of read bandwidth left with eight or more concurrent writers.
    pub read_share_eight_writers: f64,
    /// Cost per GB relative to DRAM.
    pub cost_per_gb: f64,
    /// Latency of an operation that starts where the device's previous one ended (no seek):
    /// disks serve sequential runs far faster than random blocks. `None`: no difference.
    #[serde(default)]
    pub sequential_latency_us: Option<f64>,
    /// How much operations in service together slow each other (a shared lock, a shared
    /// queue, a memory bus): with `n` in service at once, each takes `1 + contention (n - 1)`
    /// times its service time. 0 (the default): `parallelism` operations proceed at full speed.
    /// `profile measure` fits it to the 4 KiB read curve; the simulator and the engine's
    /// emulator apply it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub contention: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Which way an operation moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

impl DeviceProfile {
    /// The preset names, for help texts.
    pub const PRESETS: &'static str = "dram, optane-dcpm, cxl, optane-ssd, nvme, sata-ssd, hdd";

    /// A preset by name.
    pub fn preset(name: &str) -> Option<DeviceProfile> {
        let p = |name: &str,
                 lat: (f64, f64),
                 bw: (f64, f64),
                 par: u32,
                 inter: (f64, f64),
                 cost: f64| {
            DeviceProfile {
                name: name.to_string(),
                read_latency_us: lat.0,
                write_latency_us: lat.1,
                read_bandwidth_gb_s: bw.0,
                write_bandwidth_gb_s: bw.1,
                parallelism: par,
                read_share_one_writer: inter.0,
                read_share_eight_writers: inter.1,
                cost_per_gb: cost,
                sequential_latency_us: None,
                contention: 0.0,
            }
        };
        Some(match name {
            // Orthus Table 1: 80 ns, 15 / 15 GB/s. Writes Hurt: -18% / -35% under writers.
            // Parallelism 16: our assumption (channels x banks a socket keeps busy).
            "dram" => p("dram", (0.08, 0.08), (15.0, 15.0), 16, (0.82, 0.65), 1.0),
            // Orthus Table 1 (NVDIMM): 300 ns, 6.8 / 2.3 GB/s. Writes Hurt: 3.4/12, 0.8/12.
            // Kassa: SCM costs 0.38 of DRAM. Parallelism 8: our assumption.
            "optane-dcpm" => {
                p("optane-dcpm", (0.3, 0.3), (6.8, 2.3), 8, (3.4 / 12.0, 0.8 / 12.0), 0.38)
            }
            // Our assumption for a CXL type-3 memory expander: ~250 ns, 20 GB/s each way, DRAM
            // media (DRAM's interference), 0.5 of DRAM's cost. No paper here measures one.
            "cxl" => p("cxl", (0.25, 0.25), (20.0, 20.0), 16, (0.82, 0.65), 0.5),
            // Orthus Table 1 (low-latency SSD): 10 us, 2.5 / 2.3 GB/s, $1/GB of DRAM's ~$7.
            // Parallelism 16: our assumption (an NVMe queue depth it still scales at).
            "optane-ssd" => p("optane-ssd", (10.0, 10.0), (2.5, 2.3), 16, (1.0, 1.0), 1.0 / 7.0),
            // Orthus Table 1 (NVMe flash): 80 us, 3.0 / 2.0 GB/s; Kassa: flash costs 0.017.
            "nvme" => p("nvme", (80.0, 80.0), (3.0, 2.0), 32, (1.0, 1.0), 0.017),
            // Orthus Table 1 (SATA flash): 180 us, 0.5 / 0.5 GB/s, $0.15/GB.
            "sata-ssd" => p("sata-ssd", (180.0, 180.0), (0.5, 0.5), 4, (1.0, 1.0), 0.15 / 7.0),
            // Our assumption for a 7200 rpm disk: ~4 ms per random access (seek and rotation),
            // none for the next block of a sequential run, 0.15 GB/s, one operation at a time,
            // $0.02/GB. Hibachi (section IV-E) turns random write-backs sequential for this.
            "hdd" => DeviceProfile {
                sequential_latency_us: Some(0.0),
                ..p("hdd", (4000.0, 4000.0), (0.15, 0.15), 1, (1.0, 1.0), 0.02 / 7.0)
            },
            _ => return None,
        })
    }

    /// A profile written as TOML, checked: every field is required and unknown fields are
    /// refused, so a typo is an error that names the field.
    pub fn from_toml(text: &str) -> Result<DeviceProfile, String> {
        let profile: DeviceProfile = toml::from_str(text).map_err(|e| e.to_string())?;
        profile.validate()?;
        Ok(profile)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a profile serializes")
    }

    /// A preset name, or a path to a TOML profile; errors name the file or list the presets.
    pub fn load(name_or_path: &str) -> Result<DeviceProfile, String> {
        if let Some(profile) = DeviceProfile::preset(name_or_path) {
            return Ok(profile);
        }
        let path = std::path::Path::new(name_or_path);
        if !path.exists() {
            return Err(format!(
                "'{name_or_path}' is neither a device preset ({}) nor a file",
                Self::PRESETS
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{name_or_path}: {e}"))?;
        DeviceProfile::from_toml(&text).map_err(|e| format!("{name_or_path}: {e}"))
    }

    /// Fraction of read bandwidth left while `writers` writes are in flight: 1 with none, the
    /// measured shares at one and at eight, log-linear between, flat past eight.
    pub fn read_share(&self, writers: u32) -> f64 {
        match writers {
            0 => 1.0,
            1 => self.read_share_one_writer,
            w if w >= 8 => self.read_share_eight_writers,
            w => {
                let t = (w as f64).ln() / 8f64.ln();
                let (a, b) = (self.read_share_one_writer.ln(), self.read_share_eight_writers.ln());
                (a + (b - a) * t).exp()
            }
        }
    }

    /// Time one operation of `bytes` takes when it has its 1/parallelism share of bandwidth,
    /// with `writers` writes in flight, in nanoseconds.
    pub fn service_ns(&self, direction: Direction, bytes: u64, writers: u32) -> f64 {
        self.service_ns_at(direction, bytes, writers, false)
    }

    /// As [`service_ns`](Self::service_ns), for an operation that continues a sequential run
    /// when `sequential` (the sequential latency applies, if the profile has one).
    pub fn service_ns_at(
        &self,
        direction: Direction,
        bytes: u64,
        writers: u32,
        sequential: bool,
    ) -> f64 {
        let (latency_us, bandwidth) = match direction {
            Direction::Read => {
                (self.read_latency_us, self.read_bandwidth_gb_s * self.read_share(writers))
            }
            Direction::Write => (self.write_latency_us, self.write_bandwidth_gb_s),
        };
        let latency_us = match (sequential, self.sequential_latency_us) {
            (true, Some(sequential)) => sequential,
            _ => latency_us,
        };
        let share = bandwidth / self.parallelism.max(1) as f64;
        latency_us * 1000.0 + bytes as f64 / share
    }

    /// Checks that every number is usable; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let name = &self.name;
        let (low, high) = PROFILE_BANDWIDTH_GB_S;
        for (field, value) in [
            ("read_bandwidth_gb_s", self.read_bandwidth_gb_s),
            ("write_bandwidth_gb_s", self.write_bandwidth_gb_s),
        ] {
            if !(low..=high).contains(&value) {
                return Err(format!(
                    "profile '{name}': {field} must be {low} to {high}, got {value}"
                ));
            }
        }
        let latencies = [
            ("read_latency_us", Some(self.read_latency_us)),
            ("write_latency_us", Some(self.write_latency_us)),
            ("sequential_latency_us", self.sequential_latency_us),
        ];
        for (field, value) in latencies {
            if let Some(value) = value.filter(|v| !(0.0..=PROFILE_LATENCY_US_MAX).contains(v)) {
                return Err(format!(
                    "profile '{name}': {field} must be 0 to {PROFILE_LATENCY_US_MAX}, got {value}"
                ));
            }
        }
        for (field, value) in [
            ("read_share_one_writer", self.read_share_one_writer),
            ("read_share_eight_writers", self.read_share_eight_writers),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(format!("profile '{name}': {field} must be in (0, 1], got {value}"));
            }
        }
        if !(1..=PROFILE_PARALLELISM_MAX).contains(&self.parallelism) {
            return Err(format!(
                "profile '{name}': parallelism must be 1 to {PROFILE_PARALLELISM_MAX}, got {}",
                self.parallelism
            ));
        }
        if !(0.0..=PROFILE_CONTENTION_MAX).contains(&self.contention) {
            return Err(format!(
                "profile '{name}': contention must be 0 to {PROFILE_CONTENTION_MAX}, got {}",
                self.contention
            ));
        }
        if !(self.cost_per_gb >= 0.0 && self.cost_per_gb.is_finite()) {
            return Err(format!(
                "profile '{name}': cost_per_gb must be 0 or more, got {}",
                self.cost_per_gb
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_carry_the_papers_numbers() {
        let optane = DeviceProfile::preset("optane-dcpm").unwrap();
        assert!((optane.read_share(1) * 12.0 - 3.4).abs() < 1e-9);
        assert!((optane.read_share(8) * 12.0 - 0.8).abs() < 1e-9);
        assert!((optane.read_share(20) * 12.0 - 0.8).abs() < 1e-9);
        let dram = DeviceProfile::preset("dram").unwrap();
        assert_eq!((dram.read_share(1), dram.read_share(8)), (0.82, 0.65));
        // Between one and eight writers the share falls monotonically.
        let shares: Vec<f64> = (1..=8).map(|w| optane.read_share(w)).collect();
        assert!(shares.windows(2).all(|w| w[1] < w[0]), "{shares:?}");
        for name in DeviceProfile::PRESETS.split(", ") {
            let profile = DeviceProfile::preset(name).unwrap();
            profile.validate().unwrap();
            assert_eq!(profile.name, name);
        }
        assert_eq!(DeviceProfile::preset("floppy"), None);
    }

    #[test]
    fn service_time_is_latency_plus_transfer_at_a_share_of_bandwidth() {
        let nvme = DeviceProfile::preset("nvme").unwrap();
        // 4096 B at 3 GB/s / 32 = 0.09375 B/ns: 43690.7 ns, plus 80 us.
        let ns = nvme.service_ns(Direction::Read, 4096, 0);
        assert!((ns - (80_000.0 + 4096.0 / (3.0 / 32.0))).abs() < 1e-6, "{ns}");
        let optane = DeviceProfile::preset("optane-dcpm").unwrap();
        let alone = optane.service_ns(Direction::Read, 4096, 0);
        let hurt = optane.service_ns(Direction::Read, 4096, 1);
        assert!(hurt > alone * 2.0, "one writer makes Optane reads far slower: {alone} -> {hurt}");
    }

    #[test]
    fn profiles_round_trip_through_toml_and_typos_are_named() {
        for name in DeviceProfile::PRESETS.split(", ") {
            let profile = DeviceProfile::preset(name).unwrap();
            assert_eq!(DeviceProfile::from_toml(&profile.to_toml()).unwrap(), profile);
        }
        let text =
            DeviceProfile::preset("nvme").unwrap().to_toml().replace("parallelism", "paralelism");
        let err = DeviceProfile::from_toml(&text).unwrap_err();
        assert!(err.contains("paralelism"), "{err}");
        let err = DeviceProfile::load("/no/such/profile.toml").unwrap_err();
        assert!(err.contains("/no/such/profile.toml") && err.contains("optane-dcpm"), "{err}");
    }

    #[test]
    fn disks_serve_sequential_runs_without_seeking() {
        let hdd = DeviceProfile::preset("hdd").unwrap();
        let random = hdd.service_ns_at(Direction::Write, 4096, 0, false);
        let sequential = hdd.service_ns_at(Direction::Write, 4096, 0, true);
        assert!(random > 100.0 * sequential, "{random} vs {sequential}");
        let nvme = DeviceProfile::preset("nvme").unwrap();
        assert_eq!(
            nvme.service_ns_at(Direction::Read, 4096, 0, true),
            nvme.service_ns(Direction::Read, 4096, 0)
        );
    }

    #[test]
    fn validation_names_the_field() {
        let mut p = DeviceProfile::preset("dram").unwrap();
        p.read_share_one_writer = 1.5;
        assert!(p.validate().unwrap_err().contains("read_share_one_writer"));
        p = DeviceProfile::preset("hdd").unwrap();
        p.parallelism = 0;
        assert!(p.validate().unwrap_err().contains("parallelism"));
        // Absurd values that would allocate or sleep without bound are refused too.
        type Edit = fn(&mut DeviceProfile);
        let absurd: [(&str, Edit); 6] = [
            ("parallelism", |p| p.parallelism = u32::MAX),
            ("read_bandwidth_gb_s", |p| p.read_bandwidth_gb_s = 1e-300),
            ("write_bandwidth_gb_s", |p| p.write_bandwidth_gb_s = f64::NAN),
            ("read_latency_us", |p| p.read_latency_us = 1e30),
            ("sequential_latency_us", |p| p.sequential_latency_us = Some(-1.0)),
            ("cost_per_gb", |p| p.cost_per_gb = f64::INFINITY),
        ];
        for (field, edit) in absurd {
            let mut p = DeviceProfile::preset("nvme").unwrap();
            edit(&mut p);
            let e = p.validate().unwrap_err();
            assert!(e.contains(field) && e.contains("'nvme'"), "{field}: {e}");
        }
    }
}
