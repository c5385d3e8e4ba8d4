//! LatencyPlugin: holdoff's `latency`.

use schemars::JsonSchema;
use serde::Deserialize;

use super::doc::Doc;
use super::importer::{Importer, Plugin};
use super::keys::Unread;
use crate::error::join;
use crate::file::RawLatency;

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpLatencyPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    min_ms: Option<u64>,
    max_ms: Option<u64>,
}

/// LatencyPlugin's `maxMs` (its `minMs` is 0).
const DEFAULT_MAX_MS: u64 = 5000;

impl Importer {
    pub(super) fn latency_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpLatencyPlugin>(doc, plugin, unknown) else {
            return;
        };
        let name = plugin.name;
        if self.config.latency.is_some() {
            self.note(format!(
                "{name} appears more than once: holdoff adds one latency, so only the first \
                 was imported (Dev Proxy added both delays)."
            ));
            return;
        }
        let min_ms = settings.min_ms.unwrap_or(0);
        let max_ms = settings.max_ms.unwrap_or(DEFAULT_MAX_MS);
        if min_ms > max_ms {
            let key = if settings.min_ms.is_some() {
                "minMs"
            } else {
                "maxMs"
            };
            self.error(
                &join(&plugin.at, key),
                format!(
                    "the least delay ({min_ms} ms, minMs) is more than the most ({max_ms} ms, \
                     maxMs; Dev Proxy's default is {DEFAULT_MAX_MS})"
                ),
            );
            return;
        }
        let url = self.single_url(plugin, "its delay");
        self.config.latency = Some(RawLatency {
            min_ms,
            max_ms,
            url,
            rate: None,
        });
    }
}
