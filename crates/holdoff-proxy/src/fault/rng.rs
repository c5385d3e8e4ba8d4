//! The seeded source of every random choice the faults make.

use std::sync::{Mutex, PoisonError};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The seeded source of every random choice the faults make: the same seed and the same
/// sequence of requests give the same faults.
#[derive(Debug)]
pub struct FaultRng {
    seed: u64,
    rng: Mutex<SmallRng>,
}

impl FaultRng {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> FaultRng {
        FaultRng {
            seed,
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
        }
    }

    /// A source with a seed of its own, to be logged so the run can be repeated.
    pub fn random() -> FaultRng {
        FaultRng::new(rand::rng().random())
    }

    /// The seed in use.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Runs `f` with the generator.
    pub fn with<T>(&self, f: impl FnOnce(&mut SmallRng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod fault_rng {
        use super::*;

        #[test]
        fn the_same_seed_repeats_the_same_faults() {
            let draws = |seed| {
                FaultRng::new(seed).with(|r| (0..20).map(|_| r.random::<u32>()).collect::<Vec<_>>())
            };
            assert_eq!(draws(42), draws(42));
            assert_ne!(draws(42), draws(43));
        }
    }
}
