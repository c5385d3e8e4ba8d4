//! Jitter: a random amount that is only ever *added* to a wait, so clients that were told the
//! same time do not all come back at once. It never subtracts: a hint is a lower bound.

use std::time::Duration;

#[cfg(all(test, feature = "retry"))]
use rand::Rng;

/// How to draw the jitter `j ≥ 0` that is added to `max(H, B)`.
///
/// [`Jitter::scale`] turns a uniform draw in `[0, 1]` that the caller made into a jitter (the
/// retry loop and the gate draw it from their own seedable generator).
///
/// # Examples
///
/// ```
/// use holdoff::Jitter;
/// use std::time::Duration;
///
/// // Up to 2 s, whatever the wait; a draw of 0.5 is half of that.
/// let jitter = Jitter::Uniform(Duration::from_secs(2));
/// assert_eq!(jitter.max_for(Duration::from_secs(30)), Duration::from_secs(2));
/// assert_eq!(jitter.scale(Duration::from_secs(30), 0.5), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Jitter {
    /// No jitter.
    None,
    /// Uniform in `[0, max]`, whatever the wait.
    Uniform(Duration),
    /// Uniform in `[0, fraction × wait]`: a 30 s wait with `0.1` gets up to 3 s more.
    /// Fractions below zero (and NaN) read as zero.
    Proportional(f64),
}

impl Jitter {
    /// The largest jitter this strategy can add to `wait`.
    pub fn max_for(&self, wait: Duration) -> Duration {
        match *self {
            Jitter::None => Duration::ZERO,
            Jitter::Uniform(max) => max,
            Jitter::Proportional(fraction) if fraction > 0.0 => scale_nanos(wait, fraction),
            Jitter::Proportional(_) => Duration::ZERO,
        }
    }

    /// Draws a jitter for a wait of `wait` (that is, `max(H, B)`). Always `≥ 0`. The loop
    /// and the gate draw through [`Jitter::scale`] with their own seeded generator; this is
    /// for tests, so `rand` stays out of the public API.
    #[cfg(all(test, feature = "retry"))]
    pub(crate) fn draw<R: Rng + ?Sized>(&self, wait: Duration, rng: &mut R) -> Duration {
        self.scale(wait, rng.random::<f64>())
    }

    /// The jitter for a uniform draw `unit` in `[0, 1]`: `unit × max_for(wait)`. Out-of-range
    /// draws are clamped and NaN reads as zero, so the result is always in `[0, max_for(wait)]`.
    ///
    /// This is how the pure decision applies jitter: the caller draws `unit`, the decision
    /// scales it once it knows `max(H, B)`.
    pub fn scale(&self, wait: Duration, unit: f64) -> Duration {
        let max = self.max_for(wait);
        // `min(1.0)` keeps NaN as NaN, which `scale_nanos` reads as zero.
        scale_nanos(max, unit.min(1.0)).min(max)
    }
}

/// `duration × factor`, saturating; a negative or NaN factor gives zero.
///
/// Fixed-point with 32 fractional bits (far finer than a nanosecond of jitter needs) and one
/// 128-bit multiply: float division, `Duration::mul_f64` (which panics on overflow) and
/// `Duration::try_from_secs_f64` (exact but slow) all cost more on the decision's hot path.
fn scale_nanos(duration: Duration, factor: f64) -> Duration {
    // `as` saturates, and maps NaN and negatives to zero.
    let fixed = (factor * 4_294_967_296.0) as u64;
    let nanos = duration
        .as_nanos()
        .checked_mul(u128::from(fixed))
        .and_then(|n| u64::try_from(n >> 32).ok());
    nanos.map_or(Duration::MAX, Duration::from_nanos)
}

impl Default for Jitter {
    /// Up to 10 % of the wait.
    fn default() -> Jitter {
        Jitter::Proportional(0.1)
    }
}

// `draw` needs rand, which only the `retry` feature brings.
#[cfg(all(test, feature = "retry"))]
mod tests {
    use super::*;

    mod draw {
        use super::*;
        use proptest::prelude::*;
        use rand::SeedableRng;
        use rand::rngs::SmallRng;

        proptest! {
            #[test]
            fn never_subtracts_and_never_exceeds_its_bound(
                seed: u64, wait_ms in 0u64..10_000_000, max_ms in 0u64..100_000, fraction in -1.0f64..2.0,
            ) {
                let mut rng = SmallRng::seed_from_u64(seed);
                let wait = Duration::from_millis(wait_ms);
                for jitter in [Jitter::None, Jitter::Uniform(Duration::from_millis(max_ms)), Jitter::Proportional(fraction)] {
                    let j = jitter.draw(wait, &mut rng);
                    prop_assert!(j <= jitter.max_for(wait));
                    prop_assert!(wait + j >= wait);
                }
            }
        }

        #[test]
        fn the_same_seed_draws_the_same_sequence() {
            let draws = |seed| {
                let mut rng = SmallRng::seed_from_u64(seed);
                (0..5)
                    .map(|_| Jitter::Uniform(Duration::from_secs(1)).draw(Duration::ZERO, &mut rng))
                    .collect::<Vec<_>>()
            };
            assert_eq!(draws(42), draws(42));
            assert_ne!(draws(42), draws(43));
        }

        #[test]
        fn spreads_over_the_window() {
            let mut rng = SmallRng::seed_from_u64(1);
            let window = Duration::from_secs(1);
            let draws: Vec<Duration> = (0..1000)
                .map(|_| Jitter::Uniform(window).draw(Duration::ZERO, &mut rng))
                .collect();
            let low = draws.iter().filter(|d| **d < window / 4).count();
            let high = draws.iter().filter(|d| **d > window * 3 / 4).count();
            assert!(low > 150 && high > 150, "low {low}, high {high}");
        }

        #[test]
        fn nan_and_negative_fractions_add_nothing() {
            let mut rng = SmallRng::seed_from_u64(1);
            let wait = Duration::from_secs(10);
            assert_eq!(
                Jitter::Proportional(f64::NAN).draw(wait, &mut rng),
                Duration::ZERO
            );
            assert_eq!(
                Jitter::Proportional(-0.5).draw(wait, &mut rng),
                Duration::ZERO
            );
        }
    }
}
