//! How late the machine runs what is due: the noise in every time `holdoff check` measures.
//!
//! A retry is timed by the proxy from the throttle it sent to the retry it received. On a busy
//! machine both the client's wake-up and the proxy's reading are delayed by about the time a
//! runnable task waits for a CPU, so a client that retries at once can be measured past a
//! 100 ms threshold, and copies without jitter can come back spread apart. [`Sampler`] measures
//! that wait the whole time the scenarios run — a thread of its own asks the operating system
//! to wake it every few milliseconds and records how late it woke (a thread, not a task: an
//! async runtime's timer rounds to whole milliseconds, which is not the machine's noise) — so
//! that each verdict near a threshold can be weighed against the noise of the moment it was
//! measured in. A sleeper's wake-up is not all of it: the kernel favours a thread that wakes
//! from sleep, so a client that is *runnable* the whole time (one that retries at once, busy
//! in its own code) can be held back far longer on a contended machine. For those, the
//! sampler also reads Linux's CPU pressure (`/proc/pressure/cpu`: how long some task waited
//! for a CPU), where the kernel has it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use holdoff::clock::SystemClock;

/// How often the sampler asks to wake.
const TICK: Duration = Duration::from_millis(5);

/// Samples the machine's scheduling lateness while it lives; stops when dropped.
pub(crate) struct Sampler {
    /// When each wake-up was, on both clocks, and how late.
    samples: Arc<Mutex<Vec<(Instant, SystemTime, Duration)>>>,
    /// At each wake-up, how long some task had waited for a CPU since boot (where the kernel
    /// says), by wall time.
    stalls: Arc<Mutex<Vec<(SystemTime, Duration)>>>,
    stop: Arc<AtomicBool>,
}

impl Sampler {
    /// Starts sampling, on a thread of its own. Without a thread (the system refused one),
    /// nothing is sampled and the noise reads as zero.
    pub(crate) fn start() -> Sampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stalls = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stalled, stopped) =
            (Arc::clone(&samples), Arc::clone(&stalls), Arc::clone(&stop));
        let _ = std::thread::Builder::new()
            .name("holdoff-check-noise".to_owned())
            .spawn(move || {
                let clock = SystemClock;
                while !stopped.load(Ordering::Relaxed) {
                    let due = clock.now() + TICK;
                    clock.block_for(TICK);
                    let woke = clock.now();
                    let late = woke.saturating_duration_since(due);
                    let wall = clock.wall_now();
                    kept.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((woke, wall, late));
                    if let Some(total) = cpu_pressure() {
                        stalled
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push((wall, total));
                    }
                }
            });
        Sampler {
            samples,
            stalls,
            stop,
        }
    }

    /// The noise between `from` and `to`: how late the latest wake-up was, and how late the
    /// 99th percentile. Zero when nothing was sampled.
    pub(crate) fn between(&self, from: Instant, to: Instant) -> Noise {
        self.noise(|(at, _, _)| (from..=to).contains(at))
    }

    /// The noise while retries that reached the proxy from `first` to `last` (wall times from
    /// the event log) were on their way ([`BEFORE`] before the first).
    pub(crate) fn around(&self, first: SystemTime, last: SystemTime) -> Noise {
        let from = first.checked_sub(BEFORE).unwrap_or(first);
        let to = last + Duration::from_millis(2);
        self.noise(|(_, wall, _)| (from..=to).contains(wall))
    }

    /// The noise of the samples `keep` keeps.
    fn noise(&self, keep: impl Fn(&(Instant, SystemTime, Duration)) -> bool) -> Noise {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        let mut late: Vec<Duration> = samples
            .iter()
            .filter(|sample| keep(sample))
            .map(|(_, _, late)| *late)
            .collect();
        late.sort_unstable();
        let at = |share: f64| {
            let index = ((late.len() as f64 - 1.0) * share).round() as usize;
            late.get(index).copied().unwrap_or_default()
        };
        Noise {
            max: at(1.0),
            p99: at(0.99),
        }
    }
}

impl Sampler {
    /// The latest wake-up in the moments before `at` (a wall time from the event log, whole
    /// milliseconds), when a retry that reached the proxy at `at` was on its way: what could
    /// have delayed that retry.
    pub(crate) fn before(&self, at: SystemTime) -> Duration {
        let from = at.checked_sub(BEFORE).unwrap_or(at);
        let to = at + Duration::from_millis(2);
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples
            .iter()
            .filter(|(_, wall, _)| (from..=to).contains(wall))
            .map(|(_, _, late)| *late)
            .max()
            .unwrap_or_default()
    }
}

impl Sampler {
    /// How long some task waited for a CPU between `from` and `to` (wall times): as long as a
    /// client that was runnable all that time could have been held back. Zero without the
    /// kernel's pressure file.
    pub(crate) fn stalled(&self, from: SystemTime, to: SystemTime) -> Duration {
        let stalls = self.stalls.lock().unwrap_or_else(PoisonError::into_inner);
        let before = stalls.iter().rev().find(|(at, _)| *at <= from);
        let after = stalls.iter().find(|(at, _)| *at >= to);
        match (before, after) {
            (Some((_, then)), Some((_, now))) => now
                .saturating_sub(*then)
                .min(to.duration_since(from).unwrap_or_default() + 2 * TICK),
            _ => Duration::ZERO,
        }
    }
}

impl Sampler {
    /// The share of the time some task waited for a CPU while retries that reached the proxy
    /// from `first` to `last` were on their way ([`BEFORE`] before the first), from 0 to 1:
    /// how crowded the machine's cores were. Zero without the kernel's pressure file.
    pub(crate) fn crowding(&self, first: SystemTime, last: SystemTime) -> f64 {
        let from = first.checked_sub(BEFORE).unwrap_or(first);
        let stretch = last.duration_since(from).unwrap_or_default() + 2 * TICK;
        (self.stalled(from, last).as_secs_f64() / stretch.as_secs_f64()).min(1.0)
    }
}

/// The `some total` of `/proc/pressure/cpu`: how long, since boot, at least one task waited
/// for a CPU. `None` where the kernel has no such file (not Linux, or pressure off).
fn cpu_pressure() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|line| line.starts_with("some "))?;
    let total = some
        .split_whitespace()
        .find_map(|field| field.strip_prefix("total="))?;
    Some(Duration::from_micros(total.parse().ok()?))
}

/// How long before a retry the machine's lateness could still have delayed it: the client's
/// wake-up, its request's way through its own stack and the kernel, and the proxy's reading
/// all happen in the last few milliseconds before it arrives; a stall of the machine that
/// long shows in the samples of this stretch.
const BEFORE: Duration = Duration::from_millis(50);

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The scheduling lateness over a stretch of time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Noise {
    /// The latest wake-up.
    pub(crate) max: Duration,
    /// The 99th percentile.
    pub(crate) p99: Duration,
}
