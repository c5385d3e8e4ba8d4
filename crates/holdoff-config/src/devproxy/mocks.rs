//! MockResponsePlugin and its mocks file: holdoff's `mocks`, the mocks inlined.

use schemars::JsonSchema;
use serde::Deserialize;

use super::data::Data;
use super::doc::Doc;
use super::importer::{Importer, Plugin, backquoted, has_or_have};
use super::keys::Unread;
use super::response::{
    DEFAULT_OK_STATUS, DpResponse, framing_note, missing_bodies_note, raw_response,
};
use crate::error::{index, join};
use crate::file::{RawMock, RawMocks, RawRequestMatch};

#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpMocksPlugin {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    mocks_file: Option<String>,
    block_unmocked_requests: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
struct DpMocksFile {
    #[serde(rename = "$schema")]
    _schema: Option<Unread>,
    #[serde(rename = "definitions")]
    _definitions: Option<Unread>,
    mocks: Vec<DpMock>,
}

#[derive(Deserialize, JsonSchema)]
struct DpMock {
    request: DpMockRequest,
    response: DpResponse,
}

/// A mock's request: an errors rule's ([`DpRequest`](super::response::DpRequest)), and `nth`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DpMockRequest {
    url: String,
    method: Option<String>,
    body_fragment: Option<String>,
    nth: Option<u64>,
}

/// MockResponsePlugin's `mocksFile`.
const DEFAULT_MOCKS_FILE: &str = "mocks.json";

impl Importer {
    pub(super) fn mocks_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        let Some(settings) = self.settings::<DpMocksPlugin>(doc, plugin, unknown) else {
            return;
        };
        let then = format!("{} mocks nothing", plugin.label);
        // `--mocks-file` wins over the settings, as in Dev Proxy.
        let given = self
            .options
            .mocks_file
            .as_ref()
            .map(|file| file.display().to_string());
        self.mocks_file_read |= given.is_some();
        let Some(Data {
            file,
            value: data,
            base,
        }) = self.data::<DpMocksFile>(
            (
                &join(&plugin.at, "mocksFile"),
                given.as_deref().or(settings.mocks_file.as_deref()),
                DEFAULT_MOCKS_FILE,
            ),
            &then,
        )
        else {
            return;
        };

        let mut mocks = Vec::with_capacity(data.mocks.len());
        let (mut get, mut defaulted, mut nth) = (Vec::new(), Vec::new(), false);
        let (mut framing, mut missing) = (0, Vec::new());
        for (i, mock) in data.mocks.into_iter().enumerate() {
            let at = index("mocks", i);
            if mock.request.method.is_none() {
                get.push(at.clone());
            }
            if mock.response.status_code.is_none() {
                defaulted.push(at.clone());
            }
            nth |= mock.request.nth.is_some();
            let carried = raw_response(mock.response, DEFAULT_OK_STATUS, &self.body_files(&base));
            framing += carried.framing;
            let response = carried.response;
            missing.extend(carried.missing_body.map(|body| (index("mocks", i), body)));
            mocks.push(RawMock {
                request: RawRequestMatch {
                    url: mock.request.url,
                    method: Some(mock.request.method.unwrap_or_else(|| "GET".to_owned())),
                    body_fragment: mock.request.body_fragment,
                    nth: mock.request.nth,
                },
                response,
            });
        }

        let name = plugin.name;
        if let Some(note) = framing_note(&file, framing) {
            self.note(note);
        }
        if let Some(note) = missing_bodies_note(&file, &missing) {
            self.note(note);
        }
        if !get.is_empty() {
            self.note(format!(
                "{file}: {} no method, which Dev Proxy matches to GET only; the import says \
                 `method: GET`: {}.",
                has_or_have(get.len(), "mock"),
                backquoted(&get)
            ));
        }
        if !defaulted.is_empty() {
            self.note(format!(
                "{file}: {} no statusCode; Dev Proxy answers {DEFAULT_OK_STATUS} then, and so \
                 does the import: {}.",
                has_or_have(defaulted.len(), "response"),
                backquoted(&defaulted)
            ));
        }
        if nth {
            self.note(format!(
                "{file}: `nth` numbers the requests of a URL across the mocks that share it, \
                 as in Dev Proxy (nth 1, nth 2, then one without: the first request, the \
                 second, then the rest). Dev Proxy numbers only the requests a mock answered, \
                 holdoff every one that reaches them: a lone `nth: 2` answers the second \
                 request here, and none in Dev Proxy."
            ));
        }
        self.scope_note(plugin, "its mocks");
        self.answers(plugin);
        let block = settings.block_unmocked_requests;
        match &mut self.mocks {
            Some(existing) => {
                existing.mocks.extend(mocks);
                if block == Some(true) {
                    existing.block_unmocked = Some(true);
                }
                self.note(format!(
                    "{name} appears more than once: the mocks of all were put together, in \
                     order."
                ));
            }
            None => {
                self.mocks = Some(RawMocks {
                    mocks,
                    file: None,
                    block_unmocked: block,
                    answer_batches: None,
                });
            }
        }
    }

    /// GraphMockResponsePlugin: MockResponsePlugin's mocks file and settings, and Graph's
    /// JSON batches answered request by request from them.
    pub(super) fn graph_mocks_plugin(
        &mut self,
        doc: &mut Doc,
        plugin: &Plugin<'_>,
        unknown: &mut Vec<String>,
    ) {
        self.mocks_plugin(doc, plugin, unknown);
        if let Some(mocks) = &mut self.mocks {
            mocks.answer_batches = Some(true);
        }
    }
}
