//! Latency histograms for `/metrics` (Prometheus' cumulative buckets), lock-free so the write
//! path pays one clock read and two atomic adds. Process-wide where the measured code has no
//! handle to a registry (the durability buffer's commits).

use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket upper bounds, in seconds (the last bucket, `+Inf`, is implied).
pub const BUCKETS_S: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Observations by bucket, their count and their sum (in microseconds).
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS_S.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

/// What a histogram held at one moment: cumulative counts per bucket, count, sum in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub cumulative: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_s: f64,
}

impl Histogram {
    pub const fn new() -> Self {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS_S.len()],
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS_S.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut total = 0;
        let cumulative = BUCKETS_S
            .iter()
            .zip(&self.buckets)
            .map(|(b, n)| {
                total += n.load(Ordering::Relaxed);
                (*b, total)
            })
            .collect();
        Snapshot {
            cumulative,
            count: self.count.load(Ordering::Relaxed),
            sum_s: self.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    /// The exposition lines of this histogram under `name` (with `# HELP` and `# TYPE`).
    pub fn render(&self, name: &str, help: &str) -> String {
        let s = self.snapshot();
        let mut t = format!("# HELP {name} {help}\n# TYPE {name} histogram\n");
        for (b, n) in &s.cumulative {
            t.push_str(&format!("{name}_bucket{{le=\"{b}\"}} {n}\n"));
        }
        t.push_str(&format!(
            "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}\n",
            s.count, s.sum_s, s.count
        ));
        t
    }
}

/// How long the durability buffer's commits take (one batch: one transaction, one fsync).
pub static COMMIT_LATENCY: Histogram = Histogram::new();

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_are_cumulative_and_count_everything() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(30));
        h.observe(Duration::from_secs(10));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.cumulative[0], (0.0005, 1));
        assert_eq!(s.cumulative.last().map(|c| c.1), Some(2));
        let text = h.render("x_seconds", "test");
        assert!(text.contains("x_seconds_bucket{le=\"0.05\"} 2"), "{text}");
        assert!(text.contains("x_seconds_bucket{le=\"+Inf\"} 3"), "{text}");
        assert!(text.contains("x_seconds_count 3"), "{text}");
    }
}
