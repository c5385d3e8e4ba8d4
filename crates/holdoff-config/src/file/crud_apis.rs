//! In-memory REST APIs over a JSON array: `crudApis`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An in-memory REST API over a JSON array.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCrudApi {
    /// The URL the actions' `url`s are relative to, such as
    /// `https://api.example.com/v1/customers`. It must be watched for the API to answer.
    pub base_url: String,
    /// The data: a file holding a JSON array of items, relative to this file. Reloaded (and
    /// the API's changes forgotten) when it changes. Default: the API starts empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<String>,
    /// The requests the API answers, tried in order; the first whose method and URL match
    /// answers. A watched request none matches passes on.
    pub actions: Vec<RawCrudAction>,
}

/// One action of a CRUD API.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCrudAction {
    /// What it does.
    pub action: RawCrudActionKind,
    /// The path after `baseUrl`, with `{name}` placeholders that each match one path segment
    /// (or a query value): `/{customer-id}`. Default: `baseUrl` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The method. Default: `POST` for create, `PATCH` for merge, `PUT` for update, `DELETE`
    /// for delete, `GET` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A JSONPath (RFC 9535) over the data array that selects the item(s) the action works on,
    /// with the URL's placeholders filled in: `$[?@.id == {customer-id}]`. Dev Proxy's
    /// `$.[?(...)]` form is read too. A placeholder outside quotes that is not a number becomes
    /// a string. Required by every action but getAll and create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// What a CRUD action does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RawCrudActionKind {
    /// `200` with the whole array.
    #[default]
    GetAll,
    /// `200` with the first item the query selects, `404` when none.
    GetOne,
    /// `200` with an array of every item the query selects (maybe empty).
    GetMany,
    /// Appends the request body (a JSON object) to the array; `201` with it.
    Create,
    /// Merges the request body (a JSON object) into the first item selected; `204`, or `404`.
    Merge,
    /// Replaces the first item selected with the request body; `204`, or `404`.
    Update,
    /// Removes the first item selected; `204`, or `404`.
    Delete,
}
