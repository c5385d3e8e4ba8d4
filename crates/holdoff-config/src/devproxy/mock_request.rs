//! MockRequestPlugin and its mock file: holdoff's `mockRequest`, sent when the control API's
//! `POST /proxy/mockRequest` asks (Dev Proxy also sends it on a key press, which holdoff,
//! run in CI as often as in a terminal, does not read).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::data::Data;
use super::doc::Doc;
use super::importer::{Importer, Plugin};
use super::keys::Unread;
use crate::error::join;
use crate::file::{RawHeader, RawMockRequest};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpMockRequestPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    mock_file: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct DpMockRequestFile {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    request: DpMockRequest,
}

#[derive(Deserialize, JsonSchema)]
struct DpMockRequest {
    url: String,
    method: Option<String>,
    headers: Option<Vec<DpHeader>>,
    body: Option<Value>,
}

#[derive(Deserialize, JsonSchema)]
struct DpHeader {
    name: String,
    value: String,
}

/// MockRequestPlugin's `mockFile`.
const DEFAULT_MOCK_FILE: &str = "mock-request.json";

impl Importer {
    pub(super) fn mock_request_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpMockRequestPlugin>(doc, plugin, unknown) else {
            return;
        };
        let then = format!("{} sends nothing", plugin.label);
        let Some(Data { value: data, .. }) = self.data::<DpMockRequestFile>(
            (
                &join(&plugin.at, "mockFile"),
                settings.mock_file.as_deref(),
                DEFAULT_MOCK_FILE,
            ),
            &then,
        ) else {
            return;
        };
        let request = data.request;
        if self.config.mock_request.is_some() {
            self.note(format!(
                "{} appears more than once: only the first one's request is sent.",
                plugin.name
            ));
            return;
        }
        self.note(format!(
            "{}: its request ({} {}) is sent on `POST /proxy/mockRequest` to the control API \
             (--api-port); holdoff reads no key presses.",
            plugin.label,
            request.method.as_deref().unwrap_or("POST"),
            request.url
        ));
        self.config.mock_request = Some(RawMockRequest {
            url: request.url,
            method: request.method,
            headers: request
                .headers
                .unwrap_or_default()
                .into_iter()
                .map(|header| RawHeader {
                    name: header.name,
                    value: header.value,
                })
                .collect(),
            body: request.body,
        });
    }
}
