//! Zipf-distributed ranks: rank `r` (0-based) drawn with probability proportional to
//! `1 / (r + 1)^theta`.
//!
//! - `theta < 1`: the generator of Gray et al. ("Quickly generating billion-record synthetic
//!   databases", SIGMOD'94) that YCSB's `ZipfianGenerator` uses, including its incremental
//!   update of zeta(n) when the item count grows (YCSB workload D's "latest").
//! - `theta >= 1` (where Gray's formula divides by zero): rejection-inversion sampling of
//!   Hörmann and Derflinger ("Rejection-inversion to generate variates from monotone discrete
//!   distributions", ACM TOMACS 1996), exact for any exponent.

use tiercache_core::SeededRng;

fn zeta(from: u64, to: u64, theta: f64, start: f64) -> f64 {
    (from..to).fold(start, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// Draws ranks in `0..items` for a Zipf exponent `theta > 0`.
#[derive(Clone, Debug)]
pub struct Zipf {
    theta: f64,
    items: u64,
    method: Method,
}

#[derive(Clone, Debug)]
enum Method {
    Gray { zetan: f64, alpha: f64, eta: f64 },
    RejectionInversion { h_integral_x1: f64, h_integral_n: f64, s: f64 },
}

impl Zipf {
    /// # Panics
    /// If `items == 0` or `theta` is not positive and finite (callers validate user input).
    pub fn new(items: u64, theta: f64) -> Zipf {
        assert!(items > 0 && theta > 0.0 && theta.is_finite(), "zipf({items}, {theta})");
        let mut zipf =
            Zipf { theta, items: 0, method: Method::Gray { zetan: 0.0, alpha: 0.0, eta: 0.0 } };
        zipf.resize(items);
        zipf
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// Changes the item count; growing reuses the zeta sum computed so far (as YCSB does).
    pub fn resize(&mut self, items: u64) {
        if items == self.items {
            return;
        }
        let theta = self.theta;
        self.method = if theta < 1.0 {
            let zetan = match self.method {
                Method::Gray { zetan, .. } if items > self.items && self.items > 0 => {
                    zeta(self.items, items, theta, zetan)
                }
                _ => zeta(0, items, theta, 0.0),
            };
            let zeta2 = zeta(0, 2, theta, 0.0);
            let alpha = 1.0 / (1.0 - theta);
            let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
            Method::Gray { zetan, alpha, eta }
        } else {
            let h_integral_x1 = h_integral(1.5, theta) - 1.0;
            let h_integral_n = h_integral(items as f64 + 0.5, theta);
            let s = 2.0 - h_integral_inverse(h_integral(2.5, theta) - h(2.0, theta), theta);
            Method::RejectionInversion { h_integral_x1, h_integral_n, s }
        };
        self.items = items;
    }

    #[inline]
    pub fn next(&mut self, rng: &mut SeededRng) -> u64 {
        match self.method {
            Method::Gray { zetan, alpha, eta, .. } => {
                let u = rng.next_f64();
                let uz = u * zetan;
                if uz < 1.0 {
                    return 0;
                }
                if uz < 1.0 + 0.5f64.powf(self.theta) {
                    return 1.min(self.items - 1);
                }
                let rank = (self.items as f64 * (eta * u - eta + 1.0).powf(alpha)) as u64;
                rank.min(self.items - 1)
            }
            Method::RejectionInversion { h_integral_x1, h_integral_n, s } => loop {
                let u = h_integral_n + rng.next_f64() * (h_integral_x1 - h_integral_n);
                let x = h_integral_inverse(u, self.theta);
                let k = (x + 0.5).floor().clamp(1.0, self.items as f64);
                if k - x <= s || u >= h_integral(k + 0.5, self.theta) - h(k, self.theta) {
                    return k as u64 - 1;
                }
            },
        }
    }
}

fn h(x: f64, s: f64) -> f64 {
    (-s * x.ln()).exp()
}

/// Integral of `h` from 1 to x, shifted; `log(x)` when s = 1.
fn h_integral(x: f64, s: f64) -> f64 {
    let log_x = x.ln();
    helper2((1.0 - s) * log_x) * log_x
}

fn h_integral_inverse(x: f64, s: f64) -> f64 {
    let t = (x * (1.0 - s)).max(-1.0);
    (helper1(t) * x).exp()
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fits the slope of log(frequency) against log(rank) over the top ranks.
    fn fitted_exponent(theta: f64) -> f64 {
        let items = 10_000;
        let mut zipf = Zipf::new(items, theta);
        let mut rng = SeededRng::new(11);
        let mut counts = vec![0u64; items as usize];
        for _ in 0..2_000_000 {
            counts[zipf.next(&mut rng) as usize] += 1;
        }
        let points: Vec<(f64, f64)> =
            (0..100).map(|r| (((r + 1) as f64).ln(), (counts[r] as f64).ln())).collect();
        let n = points.len() as f64;
        let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let (sxx, sxy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x * x, b + x * y));
        -(n * sxy - sx * sy) / (n * sxx - sx * sx)
    }

    #[test]
    fn rank_frequency_follows_the_exponent() {
        for theta in [0.6, 0.9, 0.99, 1.0, 1.2] {
            let fitted = fitted_exponent(theta);
            assert!((fitted - theta).abs() < 0.05, "theta {theta}: fitted {fitted}");
        }
    }

    #[test]
    fn growing_matches_fresh_zeta() {
        let mut grown = Zipf::new(1000, 0.99);
        grown.resize(5000);
        let fresh = Zipf::new(5000, 0.99);
        match (grown.method, fresh.method) {
            (Method::Gray { zetan: a, .. }, Method::Gray { zetan: b, .. }) => {
                assert!((a - b).abs() < 1e-9)
            }
            _ => unreachable!("theta < 1 uses Gray's method"),
        }
    }

    #[test]
    fn ranks_stay_in_range() {
        let mut rng = SeededRng::new(5);
        for theta in [0.5, 1.0, 2.0] {
            let mut zipf = Zipf::new(3, theta);
            assert!((0..10_000).all(|_| zipf.next(&mut rng) < 3));
        }
    }
}
