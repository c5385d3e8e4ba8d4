//! [`Tally`]: a report built one event at a time, in memory that does not grow with the run.
//!
//! A day of traffic is millions of events; a report needs their counts and a readable part
//! of their detail. The tally keeps:
//!
//! - every count exactly: throttles by hint, retries by verdict, per client, method and URL
//!   (up to [`LISTED_ENDPOINTS`] of them; events on further ones count in the totals);
//! - the [`LISTED_VIOLATIONS`](super::LISTED_VIOLATIONS) earliest violations (and as many warnings), with the total;
//! - lateness exactly up to [`LATENESS_SAMPLE`] compliant retries, then as a uniform sample
//!   of that size (the count, the histogram and the latest stay exact);
//! - the first [`TIMELINE_ROWS`] windows and retries, for the timeline;
//! - herds as they close ([`LISTED_HERDS`] of them, with the total).
//!
//! The full detail is the event log's job: the recorder streams every event to it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::event::Event;
use super::herd::{self, Herd, RESUME_SPREAD};
use super::log::{ReportError, each_event};
use super::parts::{Endpoint, HintCounts, JUDGED_BY, JudgedBy, RetryRow, Violation, WindowRow};
use super::parts::{LISTED_ENDPOINTS, RunOutcome, TIMELINE_ROWS};
use super::run::Report;
use super::{html, time};
use crate::judge::Verdict;

mod bounded;

use bounded::{Kept, Linked, Links, Sample};

/// How many compliant retries' lateness is kept exactly; beyond, a uniform sample this big.
pub(crate) const LATENESS_SAMPLE: usize = 100_000;
/// How many herds the report lists (the first).
pub(crate) const LISTED_HERDS: usize = 1_000;
/// How many distinct `User-Agent`s the report lists, per endpoint and in all.
const LISTED_AGENTS: usize = 100;
/// How many client, method and URL families keep their recent windows, to link retries to.
const LINKED_KEYS: usize = 10_000;
/// How many recent windows each keeps.
const LINKS_PER_KEY: usize = 2;
/// How many compliant retries wait for herd detection before the oldest are examined.
const HERD_BUFFER: usize = 20_000;
/// How long after a retry a throttle on the same request is taken to answer that retry, when
/// counting the requests of a log without a finish.
const ANSWERED_WITHIN: Duration = Duration::from_secs(120);
impl Report {
    /// The report of a run's events (in the order recorded). Any events make a report: without
    /// a start or a finish, the run's details are missing, and `requests` counts the requests
    /// the events show.
    pub fn from_events(events: &[Event]) -> Report {
        let mut tally = Tally::default();
        for event in events {
            tally.add(event);
        }
        tally.into_report()
    }

    /// The report of an event log, read a line at a time: memory does not grow with the log.
    ///
    /// # Errors
    ///
    /// As [`Report::read_log`].
    pub fn from_log(path: &Path) -> Result<Report, ReportError> {
        let mut tally = Tally::default();
        each_event(path, |event| tally.add(&event))?;
        Ok(tally.into_report())
    }
}

/// A report in the making: [`Tally::add`] each event in the order recorded, then
/// [`Tally::report`] (as often as wanted).
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    /// The run's details, counts and the rows kept so far.
    report: Report,
    endpoints: BTreeMap<(String, String, String), Endpoint>,
    agents: Vec<String>,
    violations: Kept,
    no_backoff: Kept,
    /// Requests inside the wait another process was told: warnings, whatever fails the run.
    siblings: Kept,
    links: Links,
    lateness: Sample,
    resumes: Vec<Resume>,
    herds: Vec<Herd>,
    herds_seen: usize,
    /// Requests the events show: throttles and retries, a retry that was throttled once.
    held: u64,
}

/// A compliant retry waiting for herd detection.
#[derive(Clone, Debug)]
struct Resume {
    client: String,
    permitted_at: SystemTime,
    retried_at: SystemTime,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            report: Report::empty(),
            endpoints: BTreeMap::new(),
            agents: Vec::new(),
            violations: Kept::default(),
            no_backoff: Kept::default(),
            siblings: Kept::default(),
            links: Links::default(),
            lateness: Sample::default(),
            resumes: Vec::new(),
            herds: Vec::new(),
            herds_seen: 0,
            held: 0,
        }
    }
}

impl Tally {
    /// Counts `event`.
    pub(crate) fn add(&mut self, event: &Event) {
        match event {
            Event::Start {
                at,
                seed,
                source,
                command,
                proxy_url,
                judge_key,
                argv,
                allow_no_traffic,
                fail_on_no_backoff,
            } => {
                self.report.seen(*at);
                // Logs appended to one another: the first start counts.
                let r = &mut self.report;
                if r.started_at.is_none() {
                    r.started_at = Some(*at);
                    r.seed = *seed;
                    r.source = Some(source.clone());
                    r.command.clone_from(command);
                    r.argv.clone_from(argv);
                    r.allow_no_traffic = *allow_no_traffic;
                    r.fail_on_no_backoff = *fail_on_no_backoff;
                    r.proxy_url = Some(proxy_url.clone());
                    r.judge_key = Some(judge_key.clone());
                }
            }
            Event::Throttle {
                at,
                client,
                user_agent,
                method,
                url,
                status,
                permitted_at,
                hint,
                header,
                value,
                reading,
            } => {
                let window = WindowRow {
                    client: client.clone(),
                    user_agent: user_agent.clone(),
                    method: method.clone(),
                    url: url.clone(),
                    from: *at,
                    to: *permitted_at,
                    status: Some(*status),
                    hint: Some(*hint),
                    judged_by: Some(JudgedBy {
                        hint: *hint,
                        header: header.clone(),
                        value: value.clone(),
                        reading: reading.clone(),
                    }),
                };
                self.throttle(window);
            }
            Event::Retry {
                verdict,
                client,
                user_agent,
                method,
                url,
                throttled_at,
                permitted_at,
                retried_at,
                early_by_ms,
                late_by_ms,
                throttled_client,
                ..
            } => {
                // A hand-made log may leave the duration out: the times say it.
                let by_ms = match verdict {
                    Verdict::Compliant => late_by_ms.or_else(|| {
                        permitted_at.map(|permitted| time::millis_between(permitted, *retried_at))
                    }),
                    _ => early_by_ms.or_else(|| {
                        permitted_at.map(|permitted| time::millis_between(*retried_at, permitted))
                    }),
                };
                self.retry(RetryRow {
                    verdict: *verdict,
                    client: client.clone(),
                    user_agent: user_agent.clone(),
                    method: method.clone(),
                    url: url.clone(),
                    throttled_at: *throttled_at,
                    permitted_at: *permitted_at,
                    retried_at: *retried_at,
                    by_ms: by_ms.map(|ms| ms.max(0.0)),
                    window: None,
                    throttled_client: throttled_client.clone(),
                });
            }
            Event::Finish {
                at,
                requests,
                faults,
                exit_code,
                interception_failures,
                evicted_windows,
            } => {
                let r = &mut self.report;
                r.seen(*at);
                r.finished_at = Some(*at);
                r.requests = *requests;
                r.faults = Some(*faults);
                r.exit_code = *exit_code;
                r.interception_failures = *interception_failures;
                r.evicted_windows = *evicted_windows;
                r.complete = true;
            }
        }
    }

    fn throttle(&mut self, window: WindowRow) {
        let r = &mut self.report;
        r.seen(window.from);
        if let Some(to) = window.to {
            r.seen(to);
        }
        r.throttled += 1;
        if let Some(hint) = window.hint {
            r.throttled_by_hint.add(hint);
        }
        let links = self.links.of(&window.client, &window.method, &window.url);
        // A retry the proxy let through and this throttle answered is one request.
        match links.open_retry.take() {
            Some(retried) if within(retried, window.from, ANSWERED_WITHIN) => {}
            _ => self.held += 1,
        }
        let row = timeline_window(&mut self.report, &window);
        links.push(Linked::new(&window, row));
        self.links.trim();
        agent(&mut self.agents, window.user_agent.as_deref());
        if let Some(e) = endpoint(
            &mut self.endpoints,
            &window.client,
            &window.method,
            &window.url,
        ) {
            agent(&mut e.user_agents, window.user_agent.as_deref());
            if let (Some(hint), Some(judged_by)) = (window.hint, &window.judged_by) {
                e.throttles += 1;
                e.throttles_by_hint.add(hint);
                let seen = e.judged_by.iter().any(|j| j.same_way(judged_by));
                if !seen && e.judged_by.len() < JUDGED_BY {
                    e.judged_by.push(judged_by.clone());
                }
            }
        } else {
            self.report.omitted.endpoint_events += 1;
        }
    }

    fn retry(&mut self, mut row: RetryRow) {
        self.report.seen(row.retried_at);
        self.held += 1;
        // A sibling came inside another process's window: that one's, on its lane.
        let owner = match (row.verdict, &row.throttled_client) {
            (Verdict::Sibling, Some(told)) => told.clone(),
            _ => row.client.clone(),
        };
        let links = self.links.of(&owner, &row.method, &row.url);
        if matches!(row.verdict, Verdict::Compliant | Verdict::NoBackoff) {
            // Let through: a throttle that follows may answer it.
            links.open_retry = Some(row.retried_at);
        }
        let (window, window_row) = match links.nearest(row.throttled_at) {
            Some(linked) => (
                WindowRow {
                    client: String::new(),
                    user_agent: None,
                    method: String::new(),
                    url: String::new(),
                    from: linked.from,
                    to: row.permitted_at,
                    status: linked.status,
                    hint: linked.judged_by.as_ref().map(|j| j.hint),
                    judged_by: linked.judged_by.clone(),
                },
                linked.row,
            ),
            None => {
                // Its throttle was not recorded, or a sliding penalty restarted the window.
                let window = WindowRow {
                    client: owner.clone(),
                    user_agent: row.user_agent.clone(),
                    method: row.method.clone(),
                    url: row.url.clone(),
                    from: row.throttled_at,
                    to: row.permitted_at,
                    status: None,
                    hint: None,
                    judged_by: None,
                };
                let at = timeline_window(&mut self.report, &window);
                links.push(Linked::new(&window, at));
                (window, at)
            }
        };
        self.links.trim();
        agent(&mut self.agents, row.user_agent.as_deref());
        let e = endpoint(&mut self.endpoints, &row.client, &row.method, &row.url);
        if e.is_none() {
            self.report.omitted.endpoint_events += 1;
        }
        let mut e = e;
        if let Some(e) = e.as_deref_mut() {
            agent(&mut e.user_agents, row.user_agent.as_deref());
        }
        let retries = &mut self.report.retries;
        match row.verdict {
            Verdict::Compliant => {
                retries.compliant += 1;
                if let Some(e) = e {
                    e.compliant += 1;
                }
                if let (Some(ms), Some(permitted_at)) = (row.by_ms, row.permitted_at) {
                    self.lateness.add(ms);
                    self.report.late_buckets[html::bucket(ms)] += 1;
                    self.resumes.push(Resume {
                        client: row.client.clone(),
                        permitted_at,
                        retried_at: row.retried_at,
                    });
                    if self.resumes.len() >= HERD_BUFFER {
                        self.detect_herds();
                    }
                }
            }
            verdict => {
                match verdict {
                    Verdict::Premature => {
                        retries.premature += 1;
                        if let Some(e) = e {
                            e.premature += 1;
                            if let Some(ms) = row.by_ms {
                                e.worst_early_by_ms =
                                    Some(e.worst_early_by_ms.map_or(ms, |w: f64| w.max(ms)));
                            }
                        }
                    }
                    Verdict::ReadAsZero => {
                        retries.read_as_zero += 1;
                        if let Some(e) = e {
                            e.read_as_zero += 1;
                        }
                    }
                    // Another process's window: not this client's endpoint to count.
                    Verdict::Sibling => retries.sibling += 1,
                    _ => {
                        retries.no_backoff += 1;
                        if let Some(e) = e {
                            e.no_backoff += 1;
                        }
                    }
                }
                let violation = Violation {
                    kind: row.verdict,
                    client: row.client.clone(),
                    user_agent: row.user_agent.clone(),
                    method: row.method.clone(),
                    url: row.url.clone(),
                    throttled_at: row.throttled_at,
                    permitted_at: row.permitted_at,
                    retried_at: row.retried_at,
                    early_by_ms: row.by_ms,
                    status: window.status,
                    judged_by: window.judged_by.clone(),
                    why: row.why(Some(&window)),
                };
                match row.verdict {
                    Verdict::NoBackoff => self.no_backoff.add(violation),
                    Verdict::Sibling => self.siblings.add(violation),
                    _ => self.violations.add(violation),
                }
            }
        }
        row.window = window_row;
        if self.report.all_retries.len() < TIMELINE_ROWS {
            self.report.all_retries.push(row);
        } else {
            self.report.omitted.timeline_retries += 1;
        }
    }

    /// Detects the herds among the oldest waiting resumes, keeping the newest: the cut falls
    /// in a gap wider than a burst, so that no burst is split (unless retries come so densely
    /// that there is no such gap).
    fn detect_herds(&mut self) {
        self.resumes.sort_by_key(|r| r.retried_at);
        let keep_from = self.resumes.len() * 3 / 4;
        let cut = (1..=keep_from)
            .rev()
            .find(|&i| {
                !within(
                    self.resumes[i - 1].retried_at,
                    self.resumes[i].retried_at,
                    RESUME_SPREAD,
                )
            })
            .unwrap_or(keep_from);
        let found = herds_of(&self.resumes[..cut]);
        self.resumes.drain(..cut);
        self.keep_herds(found);
    }

    fn keep_herds(&mut self, found: Vec<Herd>) {
        for herd in found {
            self.herds_seen += 1;
            if self.herds.len() < LISTED_HERDS {
                self.herds.push(herd);
            }
        }
    }

    /// The report of the events so far.
    pub(crate) fn report(&self) -> Report {
        let mut tally = self.clone();
        let found = herds_of(&tally.resumes);
        tally.keep_herds(found);
        tally.finish()
    }

    /// The report, consuming the tally.
    pub(crate) fn into_report(mut self) -> Report {
        let resumes = std::mem::take(&mut self.resumes);
        let found = herds_of(&resumes);
        self.keep_herds(found);
        self.finish()
    }

    fn finish(self) -> Report {
        let mut report = self.report;
        let fail_on_no_backoff = report.fail_on_no_backoff;
        let (mut violations, mut warnings) = (self.violations, self.no_backoff);
        if fail_on_no_backoff {
            violations.merge(std::mem::take(&mut warnings));
        }
        warnings.merge(self.siblings);
        violations.trim();
        warnings.trim();
        report.omitted.violations = violations.left_out;
        report.omitted.warnings = warnings.left_out;
        report.violations = violations.into_sorted();
        report.warnings = warnings.into_sorted();
        report.endpoints = self
            .endpoints
            .into_values()
            .map(|mut e| {
                e.user_agents.sort();
                e
            })
            .collect();
        let mut agents = self.agents;
        agents.sort();
        report.user_agents = agents;
        let mut herds = self.herds;
        herds.sort_by_key(|h| h.permitted_at);
        report.omitted.herds = self.herds_seen - herds.len();
        report.herds = herds;
        report.omitted.lateness_unsampled = self.lateness.seen - self.lateness.values.len();
        report.lateness = self.lateness.lateness();
        if !report.complete {
            report.requests = self.held;
        }
        let retries = report.retries;
        let failed = retries.premature
            + retries.read_as_zero
            + if fail_on_no_backoff {
                retries.no_backoff
            } else {
                0
            };
        report.verdict = if failed > 0 {
            RunOutcome::Fail
        } else if (report.complete && report.requests == 0) || report.interception_failures > 0 {
            // Requests in a tunnel that could not be intercepted never reached the judge.
            RunOutcome::NotTested
        } else {
            RunOutcome::Pass
        };
        report.duration_ms = match (report.started_at, report.finished_at) {
            (Some(start), Some(end)) => Some(time::millis_between(start, end).max(0.0)),
            _ => None,
        };
        report.reproduce = Some(report.reproduce_line());
        report
    }
}

/// Adds `window` to the timeline, if there is room: its row.
fn timeline_window(report: &mut Report, window: &WindowRow) -> Option<usize> {
    if report.windows.len() < TIMELINE_ROWS {
        report.windows.push(window.clone());
        Some(report.windows.len() - 1)
    } else {
        report.omitted.timeline_windows += 1;
        None
    }
}

/// The herds among `resumes`.
fn herds_of(resumes: &[Resume]) -> Vec<Herd> {
    let borrowed: Vec<herd::Resume<'_>> = resumes
        .iter()
        .map(|r| herd::Resume {
            client: &r.client,
            permitted_at: r.permitted_at,
            retried_at: r.retried_at,
        })
        .collect();
    herd::detect(&borrowed)
}

/// The endpoint of a client, method and URL (keyed client, URL, method, the order endpoints
/// are listed in), added if new and there is room; `None` when there is not.
fn endpoint<'m>(
    map: &'m mut BTreeMap<(String, String, String), Endpoint>,
    client: &str,
    method: &str,
    url: &str,
) -> Option<&'m mut Endpoint> {
    let key = (client.to_owned(), url.to_owned(), method.to_owned());
    let room = map.len() < LISTED_ENDPOINTS;
    match map.entry(key) {
        std::collections::btree_map::Entry::Occupied(e) => Some(e.into_mut()),
        std::collections::btree_map::Entry::Vacant(_) if !room => None,
        std::collections::btree_map::Entry::Vacant(e) => Some(e.insert(Endpoint {
            client: client.to_owned(),
            method: method.to_owned(),
            url: url.to_owned(),
            user_agents: Vec::new(),
            throttles: 0,
            throttles_by_hint: HintCounts::default(),
            compliant: 0,
            premature: 0,
            read_as_zero: 0,
            no_backoff: 0,
            worst_early_by_ms: None,
            judged_by: Vec::new(),
        })),
    }
}

/// Adds `agent` to `agents` once, while there is room.
fn agent(agents: &mut Vec<String>, agent: Option<&str>) {
    if let Some(agent) = agent
        && agents.len() < LISTED_AGENTS
        && !agents.iter().any(|a| a == agent)
    {
        agents.push(agent.to_owned());
    }
}

/// Whether `later` is at most `tolerance` after `earlier` (which it is not before).
fn within(earlier: SystemTime, later: SystemTime, tolerance: Duration) -> bool {
    later
        .duration_since(earlier)
        .is_ok_and(|gap| gap <= tolerance)
}
