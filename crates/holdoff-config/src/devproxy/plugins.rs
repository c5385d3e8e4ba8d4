//! Dev Proxy's plugins: which the import maps, and why holdoff has no counterpart to the
//! others.

/// Whether the import maps the plugin (and so reads its section).
pub(super) fn is_mapped(name: &str) -> bool {
    matches!(
        name,
        "AuthPlugin"
            | "GenericRandomErrorPlugin"
            | "GraphRandomErrorPlugin"
            | "RateLimitingPlugin"
            | "LanguageModelRateLimitingPlugin"
            | "LatencyPlugin"
            | "MockResponsePlugin"
            | "CrudApiPlugin"
            | "RetryAfterPlugin"
    )
}

/// Why holdoff has no counterpart to the plugin.
pub(super) fn unsupported(name: &str) -> &'static str {
    match name {
        "LanguageModelFailurePlugin" => {
            "holdoff does not make language-model answers go wrong, it fails requests"
        }
        "GraphMockResponsePlugin" | "EntraMockResponsePlugin" | "OpenAIMockResponsePlugin" => {
            "it builds its responses in code; MockResponsePlugin's mocks can stand in"
        }
        name if name.ends_with("GuidancePlugin") => {
            "it only logs advice about the requests it sees, and changes no traffic"
        }
        name if [
            "Generator",
            "Reporter",
            "Summary",
            "Telemetry",
            "DevTools",
            "Discovery",
            "Permissions",
            "ApiCenter",
            "Debugging",
        ]
        .iter()
        .any(|part| name.contains(part)) =>
        {
            "it observes or reports traffic, and injects no faults"
        }
        _ => "holdoff has no equivalent",
    }
}
