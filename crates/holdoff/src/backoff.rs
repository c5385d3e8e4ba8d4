//! The local backoff `B`: how long the client itself wants to wait after attempt `n`.
//!
//! Its cap limits `B` only. The server's hint is never capped by it (DESIGN, decision step 6).

use std::time::Duration;

/// A local backoff schedule.
///
/// # Examples
///
/// ```
/// use holdoff::Backoff;
/// use std::time::Duration;
///
/// let backoff = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(8));
/// let waits: Vec<_> = (1..=5).map(|n| backoff.delay(n).as_secs()).collect();
/// assert_eq!(waits, [1, 2, 4, 8, 8]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backoff {
    /// No local wait: only the server's hint (and jitter) delays a retry.
    None,
    /// The same wait after every attempt.
    Constant(Duration),
    /// `base × factorⁿ⁻¹` after attempt `n`, never more than `max`.
    Exponential {
        /// The wait after the first attempt.
        base: Duration,
        /// The growth per attempt.
        factor: u32,
        /// The cap on the local wait (never on the server's hint).
        max: Duration,
    },
}

impl Backoff {
    /// Doubling from `base`, capped at `max`.
    pub const fn exponential(base: Duration, max: Duration) -> Backoff {
        Backoff::Exponential {
            base,
            factor: 2,
            max,
        }
    }

    /// The local wait after attempt `attempt` (1 for the first attempt). Never panics,
    /// whatever the attempt number: growth saturates at the cap.
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::None => Duration::ZERO,
            Backoff::Constant(wait) => wait,
            Backoff::Exponential { base, factor, max } => {
                let exp = attempt.saturating_sub(1);
                let scale = factor.checked_pow(exp).unwrap_or(u32::MAX);
                base.checked_mul(scale).unwrap_or(Duration::MAX).min(max)
            }
        }
    }
}

impl Default for Backoff {
    /// Exponential from 1 s, doubling, capped at 30 s.
    fn default() -> Backoff {
        Backoff::exponential(Duration::from_secs(1), Duration::from_secs(30))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    mod delay {
        use super::*;

        #[test]
        fn the_default_doubles_from_one_second_to_thirty() {
            let waits: Vec<u64> = (1..=7)
                .map(|n| Backoff::default().delay(n).as_secs())
                .collect();
            assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        }

        #[test]
        fn attempt_zero_reads_as_the_first() {
            assert_eq!(Backoff::default().delay(0), Duration::from_secs(1));
        }

        proptest! {
            #[test]
            fn never_exceeds_the_cap_and_never_shrinks(
                base_ms in 0u64..100_000, max_ms in 0u64..10_000_000, factor in 1u32..10, n in 1u32..200,
            ) {
                let backoff = Backoff::Exponential {
                    base: Duration::from_millis(base_ms),
                    factor,
                    max: Duration::from_millis(max_ms),
                };
                prop_assert!(backoff.delay(n) <= Duration::from_millis(max_ms));
                prop_assert!(backoff.delay(n + 1) >= backoff.delay(n));
            }
        }
    }
}
