//! RetryAfterPlugin: nothing to carry over, as holdoff's judge is always on; and a note when
//! it was off in Dev Proxy.

use super::doc::Doc;
use super::importer::{Importer, Plugin};

impl Importer {
    /// Its settings are not read: there is nothing to carry over.
    pub(super) fn retry_after_plugin(&mut self, _: &mut Doc, _: &Plugin<'_>, _: &mut Vec<String>) {
        self.retry_after_plugin = true;
        self.note(
            "RetryAfterPlugin needs no setting: holdoff's judge is always on. It keys its \
             windows by client, method and URL, and judges every Retry-After a client \
             receives, the upstream's too, not only the ones holdoff sends; Dev Proxy kept one \
             wait per host, and started it over on a retry that came too soon. For Dev \
             Proxy's behaviour set judge.key to `host` and judge.penalty to `sliding` (or pass \
             --judge-key host --judge-penalty sliding).",
        );
    }

    pub(super) fn judge_notes(&mut self) {
        let throttles = self.config.errors.is_some()
            || !self.config.rate_limits.is_empty()
            || !self.config.llm_rate_limits.is_empty();
        if throttles && !self.retry_after_plugin {
            self.note(
                "RetryAfterPlugin is not enabled, so Dev Proxy let early retries through; \
                 holdoff's judge is always on, and answers a retry that comes before its \
                 Retry-After again without forwarding it (--judge-key host --judge-penalty \
                 sliding judge as Dev Proxy's RetryAfterPlugin does).",
            );
        }
    }
}
