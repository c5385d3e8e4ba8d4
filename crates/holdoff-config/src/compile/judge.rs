//! `judge`: how the judge keys and penalises retries.

use super::{Compiler, WrittenIn};
use crate::file::{RawJudge, RawPenalty};
use holdoff_proxy::judge::{KeyMode, Penalty};

impl Compiler {
    /// `judge.key` and `judge.penalty`, each `None` when not set (or, for the key, invalid).
    pub(super) fn judge(
        &mut self,
        at: WrittenIn<'_>,
        judge: Option<&RawJudge>,
    ) -> (Option<KeyMode>, Option<Penalty>) {
        let judge_key = judge
            .and_then(|judge| judge.key.as_deref())
            .and_then(|raw| match raw.parse::<KeyMode>() {
                Ok(mode) => Some(mode),
                Err(message) => {
                    self.error(at, "judge.key", message);
                    None
                }
            });
        let judge_penalty = judge.and_then(|judge| judge.penalty).map(|p| match p {
            RawPenalty::None => Penalty::None,
            RawPenalty::Sliding => Penalty::Sliding,
        });
        (judge_key, judge_penalty)
    }
}
