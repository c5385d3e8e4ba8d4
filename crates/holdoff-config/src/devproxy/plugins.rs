//! Dev Proxy's plugins: the table of those the import maps (name, importer, the step of
//! `order` it answers in), and why holdoff has no counterpart to the others.

use super::doc::Doc;
use super::importer::{Importer, Plugin};
use crate::file::RawFaultStep;

/// A plugin the import maps.
pub(super) struct Mapped {
    /// Its name, as `plugins` names it.
    pub(super) name: &'static str,
    /// The step of holdoff's `order` its faults answer in; `None` when it answers no request
    /// itself (latency, the judge).
    pub(super) step: Option<RawFaultStep>,
    /// Reads its section (and the files it names) into holdoff's configuration.
    pub(super) import: fn(&mut Importer, &mut Doc, &Plugin<'_>, &mut Vec<String>),
}

/// Every plugin the import maps: the one place each is named.
const MAPPED: [Mapped; 13] = [
    Mapped {
        name: "AuthPlugin",
        step: Some(RawFaultStep::Auth),
        import: Importer::auth_plugin,
    },
    Mapped {
        name: "GenericRandomErrorPlugin",
        step: Some(RawFaultStep::Errors),
        import: Importer::errors_plugin,
    },
    Mapped {
        name: "GraphRandomErrorPlugin",
        step: Some(RawFaultStep::Errors),
        import: Importer::graph_errors_plugin,
    },
    Mapped {
        name: "RateLimitingPlugin",
        step: Some(RawFaultStep::RateLimits),
        import: Importer::rate_limiting_plugin,
    },
    Mapped {
        name: "LanguageModelRateLimitingPlugin",
        step: Some(RawFaultStep::LlmRateLimits),
        import: Importer::llm_rate_limiting_plugin,
    },
    Mapped {
        name: "LatencyPlugin",
        step: None,
        import: Importer::latency_plugin,
    },
    Mapped {
        name: "MockResponsePlugin",
        step: Some(RawFaultStep::Mocks),
        import: Importer::mocks_plugin,
    },
    Mapped {
        name: "CrudApiPlugin",
        step: Some(RawFaultStep::CrudApis),
        import: Importer::crud_api_plugin,
    },
    Mapped {
        name: "RetryAfterPlugin",
        step: None,
        import: Importer::retry_after_plugin,
    },
    Mapped {
        name: "GraphMockResponsePlugin",
        step: Some(RawFaultStep::Mocks),
        import: Importer::graph_mocks_plugin,
    },
    Mapped {
        name: "OpenAIMockResponsePlugin",
        step: Some(RawFaultStep::Mocks),
        import: Importer::llm_mocks_plugin,
    },
    Mapped {
        name: "LanguageModelFailurePlugin",
        step: None,
        import: Importer::llm_failure_plugin,
    },
    Mapped {
        name: "MockRequestPlugin",
        step: None,
        import: Importer::mock_request_plugin,
    },
];

/// The plugin named `name`, if the import maps it (and so reads its section).
pub(super) fn mapped(name: &str) -> Option<&'static Mapped> {
    MAPPED.iter().find(|plugin| plugin.name == name)
}

/// Why holdoff has no counterpart to the plugin.
pub(super) fn unsupported(name: &str) -> &'static str {
    match name {
        "EntraMockResponsePlugin" => {
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
