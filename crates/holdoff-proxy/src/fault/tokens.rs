//! Token budgets for language-model APIs (Dev Proxy's LanguageModelRateLimitingPlugin): so
//! many prompt tokens and so many completion tokens per window, counted from what each
//! response says it used, and every request refused once either budget is used up.
//!
//! Pure: [`TokenWindows::check`] is given the monotonic time and reads no clock. A window
//! starts at the first request that meets it, lasts [`TokenBudget::window`], and the first
//! request at or after its end starts the next one (Dev Proxy's windows: not aligned to a
//! grid, and idle between the end of one and the request that starts the next). Tokens count
//! in the window their request was admitted in: a response that ends after its window did
//! is not counted against the next.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How many tokens a window allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TokenBudget {
    /// Prompt (input) tokens per window.
    pub prompt: u64,
    /// Completion (output) tokens per window.
    pub completion: u64,
    /// How long a window lasts from its first request.
    pub window: Duration,
}

/// Tokens one exchange used: from the response's `usage`, or estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt: u64,
    /// Completion (output) tokens.
    pub completion: u64,
}

/// Which budget is used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Spent {
    /// The prompt tokens.
    Prompt,
    /// The completion tokens.
    Completion,
}

impl Spent {
    /// `prompt` or `completion`, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Spent::Prompt => "prompt",
            Spent::Completion => "completion",
        }
    }
}

/// What a budget says of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetCheck {
    /// Within the budget: the request goes on, and what it uses counts in this window.
    Within {
        /// The window's identity, for spending the response's tokens in it later.
        window: u64,
    },
    /// A budget is used up until the window ends.
    Exhausted {
        /// Which one (the prompt's, when both are).
        spent: Spent,
        /// The time until the window ends.
        reset: Duration,
    },
}

/// One window of one key.
#[derive(Clone, Copy, Debug)]
struct Window {
    id: u64,
    ends: Instant,
    usage: Usage,
}

/// Token windows for one budget, one per key (a client, or one shared key).
#[derive(Debug)]
pub(crate) struct TokenWindows {
    budget: TokenBudget,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    windows: HashMap<String, Window>,
    /// The identity of the last window started.
    last_id: u64,
}

impl TokenWindows {
    /// Windows for `budget`, none started yet.
    pub(crate) fn new(budget: TokenBudget) -> TokenWindows {
        TokenWindows {
            budget,
            state: Mutex::default(),
        }
    }

    /// Whether a request under `key` at `now` is within the budget; starts a window when
    /// there is none, or the last one has ended.
    pub(crate) fn check(&self, key: &str, now: Instant) -> BudgetCheck {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { windows, last_id } = &mut *state;
        let current = windows.get(key).filter(|window| now < window.ends).copied();
        let window = match current {
            Some(window) => window,
            None => {
                *last_id += 1;
                let window = Window {
                    id: *last_id,
                    // Beyond the clock's range: a window that never ends, rather than a panic.
                    ends: now
                        .checked_add(self.budget.window)
                        .unwrap_or(now + Duration::from_secs(u32::MAX.into())),
                    usage: Usage::default(),
                };
                windows.insert(key.to_owned(), window);
                window
            }
        };
        match exhausted(window.usage, self.budget) {
            Some(spent) => BudgetCheck::Exhausted {
                spent,
                reset: window.ends.saturating_duration_since(now),
            },
            None => BudgetCheck::Within { window: window.id },
        }
    }

    /// Counts `usage` under `key` in the window `window` ([`BudgetCheck::Within`]); whether it
    /// was counted (not when that window has ended since).
    pub(crate) fn spend(&self, key: &str, window: u64, usage: Usage) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match state.windows.get_mut(key) {
            Some(current) if current.id == window => {
                current.usage.prompt = current.usage.prompt.saturating_add(usage.prompt);
                current.usage.completion =
                    current.usage.completion.saturating_add(usage.completion);
                true
            }
            _ => false,
        }
    }

    /// Forgets the windows that have ended by `now` (the next request starts afresh anyway),
    /// and returns how many.
    pub(crate) fn evict(&self, now: Instant) -> usize {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let before = state.windows.len();
        state.windows.retain(|_, window| now < window.ends);
        before - state.windows.len()
    }
}

/// Which budget `usage` has used up, if one is.
pub(crate) fn exhausted(usage: Usage, budget: TokenBudget) -> Option<Spent> {
    if usage.prompt >= budget.prompt {
        Some(Spent::Prompt)
    } else if usage.completion >= budget.completion {
        Some(Spent::Completion)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdoff::clock::SystemClock;

    const BUDGET: TokenBudget = TokenBudget {
        prompt: 100,
        completion: 50,
        window: Duration::from_secs(60),
    };

    fn within(check: BudgetCheck) -> u64 {
        match check {
            BudgetCheck::Within { window } => window,
            other => panic!("within the budget, not {other:?}"),
        }
    }

    mod check {
        use super::*;

        #[test]
        fn refuses_once_the_prompt_budget_is_used_until_the_window_ends() {
            let windows = TokenWindows::new(BUDGET);
            let start = SystemClock.now();
            let first = within(windows.check("a", start));
            assert!(windows.spend(
                "a",
                first,
                Usage {
                    prompt: 60,
                    completion: 5
                }
            ));
            let second = within(windows.check("a", start + Duration::from_secs(10)));
            assert_eq!(first, second, "the same window");
            assert!(windows.spend(
                "a",
                second,
                Usage {
                    prompt: 40,
                    completion: 5
                }
            ));
            assert_eq!(
                windows.check("a", start + Duration::from_millis(20_500)),
                BudgetCheck::Exhausted {
                    spent: Spent::Prompt,
                    reset: Duration::from_millis(39_500),
                }
            );
        }

        #[test]
        fn refuses_once_the_completion_budget_is_used() {
            let windows = TokenWindows::new(BUDGET);
            let start = SystemClock.now();
            let window = within(windows.check("a", start));
            windows.spend(
                "a",
                window,
                Usage {
                    prompt: 1,
                    completion: 50,
                },
            );
            assert!(matches!(
                windows.check("a", start),
                BudgetCheck::Exhausted {
                    spent: Spent::Completion,
                    ..
                }
            ));
        }

        #[test]
        fn starts_the_next_window_at_the_first_request_after_the_end() {
            let windows = TokenWindows::new(BUDGET);
            let start = SystemClock.now();
            let first = within(windows.check("a", start));
            windows.spend(
                "a",
                first,
                Usage {
                    prompt: 100,
                    completion: 0,
                },
            );
            // Idle for 90 s: the next window starts at the request, not on a 60 s grid.
            let later = start + Duration::from_secs(90);
            let second = within(windows.check("a", later));
            assert_ne!(first, second);
            windows.spend(
                "a",
                second,
                Usage {
                    prompt: 100,
                    completion: 0,
                },
            );
            assert_eq!(
                windows.check("a", later + Duration::from_secs(1)),
                BudgetCheck::Exhausted {
                    spent: Spent::Prompt,
                    reset: Duration::from_secs(59),
                }
            );
        }

        #[test]
        fn admits_a_retry_at_exactly_the_end_of_the_window() {
            let windows = TokenWindows::new(BUDGET);
            let start = SystemClock.now();
            let first = within(windows.check("a", start));
            windows.spend(
                "a",
                first,
                Usage {
                    prompt: 100,
                    completion: 0,
                },
            );
            within(windows.check("a", start + BUDGET.window));
        }

        #[test]
        fn keeps_one_window_per_key() {
            let windows = TokenWindows::new(BUDGET);
            let now = SystemClock.now();
            let a = within(windows.check("a", now));
            windows.spend(
                "a",
                a,
                Usage {
                    prompt: 100,
                    completion: 0,
                },
            );
            within(windows.check("b", now));
        }
    }

    mod spend {
        use super::*;

        #[test]
        fn drops_tokens_whose_window_has_ended() {
            let windows = TokenWindows::new(BUDGET);
            let start = SystemClock.now();
            let old = within(windows.check("a", start));
            let new = within(windows.check("a", start + Duration::from_secs(61)));
            assert!(!windows.spend(
                "a",
                old,
                Usage {
                    prompt: 100,
                    completion: 0
                }
            ));
            assert!(windows.spend(
                "a",
                new,
                Usage {
                    prompt: 1,
                    completion: 0
                }
            ));
            within(windows.check("a", start + Duration::from_secs(62)));
        }
    }

    mod evict {
        use super::*;

        #[test]
        fn forgets_ended_windows_only() {
            let windows = TokenWindows::new(BUDGET);
            let start = SystemClock.now();
            within(windows.check("a", start));
            within(windows.check("b", start + Duration::from_secs(30)));
            assert_eq!(windows.evict(start + Duration::from_secs(60)), 1);
            assert_eq!(windows.evict(start + Duration::from_secs(60)), 0);
        }
    }
}
