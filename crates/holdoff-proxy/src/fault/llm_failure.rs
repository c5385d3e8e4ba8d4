//! Language-model answers that go wrong on purpose, as Dev Proxy's LanguageModelFailurePlugin
//! makes them: a call to a language model's API (OpenAI's chat completions, completions or
//! responses) is forwarded with one more instruction, drawn from the kinds of failure below,
//! that asks the model to fail in that way; the app then meets a plausible but wrong answer,
//! a hedge, a contradiction, and must cope.
//!
//! The instructions are holdoff's own words for the failure kinds Dev Proxy lists.

use bytes::Bytes;
use serde_json::{Value, json};

use super::RequestMatch;

/// A kind of failure, by Dev Proxy's name, and the instruction that provokes it.
const FAILURES: [(&str, &str); 15] = [
    (
        "AmbiguityVagueness",
        "Answer vaguely: use general terms, avoid specifics and leave the question open to \
         several readings.",
    ),
    (
        "BiasStereotyping",
        "Let a one-sided assumption about the people or groups involved shape the answer.",
    ),
    (
        "CircularReasoning",
        "Justify the answer by restating it in other words instead of giving reasons.",
    ),
    (
        "ContradictoryInformation",
        "Say something in the answer that a later part of the answer contradicts.",
    ),
    (
        "FailureDisclaimHedge",
        "Hedge everything: add disclaimers and qualifications until no clear answer is left.",
    ),
    (
        "FailureFollowInstructions",
        "Ignore part of the user's instructions, such as the format or the length they asked for.",
    ),
    (
        "Hallucination",
        "Include a confident, specific detail (a name, number, date or source) that is made up.",
    ),
    (
        "IncorrectFormatStyle",
        "Answer in a format and tone other than the one the request asks for or implies.",
    ),
    (
        "Misinterpretation",
        "Answer a slightly different question than the one asked, as if it had been misread.",
    ),
    (
        "OutdatedInformation",
        "Base the answer on information that was true years ago but is no longer current.",
    ),
    (
        "OverSpecification",
        "Bury the answer in needless detail and caveats that the question did not ask for.",
    ),
    (
        "OverconfidenceUncertainty",
        "State uncertain or unknown things as established facts, with full confidence.",
    ),
    (
        "Overgeneralization",
        "Draw a sweeping general rule from a single case or a narrow set of examples.",
    ),
    (
        "OverreliancePriorConversation",
        "Lean on assumptions from earlier in the conversation even where they no longer apply.",
    ),
    (
        "PlausibleIncorrect",
        "Give an answer that sounds right and is well phrased, but is factually wrong.",
    ),
];

/// The failure kinds, by Dev Proxy's names.
pub fn failure_names() -> impl Iterator<Item = &'static str> {
    FAILURES.iter().map(|(name, _)| *name)
}

/// A rule: language-model calls to matching URLs get one of `failures` (indexes into the kinds,
/// see [`failure_names`]); the first rule whose request matches decides.
#[derive(Clone, Debug)]
pub struct LlmFailureRule {
    /// Which requests: `POST`s to these URLs.
    pub request: RequestMatch,
    /// The kinds of failure drawn from, by name; never empty.
    pub failures: Vec<&'static str>,
}

impl LlmFailureRule {
    /// The failure kind named `name` (in any case), if there is one.
    pub fn kind(name: &str) -> Option<&'static str> {
        failure_names().find(|known| known.eq_ignore_ascii_case(name))
    }

    /// `body` with the instruction for failure `pick` (an index into `failures`, taken modulo
    /// their number) added, and the failure's name; `None` when the body is no language-model
    /// call.
    pub(crate) fn corrupt(&self, body: &[u8], pick: usize) -> Option<(&'static str, Bytes)> {
        let name = *self.failures.get(pick % self.failures.len().max(1))?;
        let instruction = FAILURES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, instruction)| *instruction)?;
        let mut request: Value = serde_json::from_slice(body).ok()?;
        let fields = request.as_object_mut()?;
        if let Some(Value::Array(messages)) = fields.get_mut("messages") {
            messages.push(json!({ "role": "system", "content": instruction }));
        } else if let Some(input) = fields.get_mut("input") {
            match input {
                Value::Array(items) => {
                    items.push(json!({ "role": "system", "content": instruction }))
                }
                Value::String(text) => {
                    let asked = std::mem::take(text);
                    *input = json!([
                        { "role": "user", "content": asked },
                        { "role": "system", "content": instruction },
                    ]);
                }
                _ => return None,
            }
        } else if let Some(Value::String(prompt)) = fields.get_mut("prompt") {
            prompt.push_str("\n\n");
            prompt.push_str(instruction);
        } else {
            return None;
        }
        Some((name, Bytes::from(request.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(failures: &[&'static str]) -> LlmFailureRule {
        LlmFailureRule {
            request: RequestMatch::url("https://api.openai.com/*".parse().unwrap()),
            failures: failures.to_vec(),
        }
    }

    #[test]
    fn a_chat_call_gets_a_system_message_asking_for_the_failure() {
        let body =
            br#"{"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}]}"#;
        let (name, corrupted) = rule(&["Hallucination"]).corrupt(body, 0).unwrap();
        assert_eq!(name, "Hallucination");
        let corrupted: Value = serde_json::from_slice(&corrupted).unwrap();
        let messages = corrupted["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1]["role"], "system");
        assert!(messages[1]["content"].as_str().unwrap().contains("made up"));
        assert_eq!(corrupted["model"], "m");
    }

    #[test]
    fn completions_and_responses_get_it_their_way_and_others_none() {
        let r = rule(&["PlausibleIncorrect", "Misinterpretation"]);
        let (name, prompt) = r.corrupt(br#"{"prompt": "2+2="}"#, 1).unwrap();
        assert_eq!(name, "Misinterpretation");
        let prompt: Value = serde_json::from_slice(&prompt).unwrap();
        assert!(prompt["prompt"].as_str().unwrap().starts_with("2+2=\n\n"));
        let (_, input) = r.corrupt(br#"{"input": "Hi"}"#, 0).unwrap();
        let input: Value = serde_json::from_slice(&input).unwrap();
        assert_eq!(input["input"][0]["content"], "Hi");
        assert_eq!(input["input"][1]["role"], "system");
        assert_eq!(r.corrupt(br#"{"name": "x"}"#, 0), None);
    }

    #[test]
    fn every_kind_dev_proxy_lists_is_known_in_any_case() {
        assert_eq!(failure_names().count(), 15);
        assert_eq!(LlmFailureRule::kind("hallucination"), Some("Hallucination"));
        assert_eq!(LlmFailureRule::kind("Nonsense"), None);
    }
}
