//! Dev Proxy's plugin order, carried over to holdoff's `order`.

use super::importer::{Importer, backquoted};
use crate::file::RawFaultStep;

impl Importer {
    /// Dev Proxy's plugin order as holdoff's `order`: each step where its first plugin is
    /// listed. Written whenever more than one kind of plugin can answer, so that the file
    /// says it; a note when a step's plugins are not listed together, which one list cannot
    /// say.
    pub(super) fn carry_order(&mut self) {
        let mut steps: Vec<RawFaultStep> = Vec::new();
        for (step, _) in &self.order {
            if !steps.contains(step) {
                steps.push(*step);
            }
        }
        if steps.len() < 2 {
            return;
        }
        self.config.order = Some(steps.clone());
        let runs = self
            .order
            .windows(2)
            .filter(|pair| pair[0].0 != pair[1].0)
            .count()
            + 1;
        if runs > steps.len() {
            let listed: Vec<&str> = self.order.iter().map(|(_, name)| name.as_str()).collect();
            let keys: Vec<&str> = steps.iter().map(|step| step.key()).collect();
            self.note(format!(
                "Dev Proxy runs its plugins in the order listed ({}); holdoff runs each kind of \
                 fault in one place, so the order became {}: a plugin listed apart from the \
                 first of its kind now runs with it.",
                listed.join(", "),
                backquoted(&keys)
            ));
        }
    }
}
