//! The HTML report: one self-contained page — no script, no network, no external asset —
//! with the verdict, a timeline chart per client drawn as inline SVG, a histogram of how late
//! compliant retries came, the violations, the herds and the run's details.
//!
//! The charts' elements have stable classes for tests and user styles: each chart is an
//! `svg.timeline` (with `data-client`, `data-premature`, `data-read-as-zero`,
//! `data-no-backoff` and `data-compliant`), drawn on a `rect.paper`; every throttle is a
//! `path.throttle`, and its window a `rect.window` (with `data-hint`) to its permitted time:
//! the hint's, the minimum backoff's for a malformed hint (`rect.window.malformed`) or none
//! (`rect.window.no-hint`, a short one), or to the end of the chart for a hint beyond the
//! clock's range (`rect.window.unbounded`). A retry is a `circle.retry.premature` or
//! `circle.retry.read-as-zero` (red), `circle.retry.no-backoff` (amber) or
//! `circle.retry.compliant` (green). The histogram is an `svg.histogram` of `rect.bar`s.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::SystemTime;

use super::markdown::faults_line;
use super::outcome::{Case, Headline, NO_TRAFFIC_CAUSES, unintercepted};
use super::text::{client_label, count, html_with_code, millis, shell_words, truncate, xml};
use super::{HintKind, JudgedBy, Report, RetryRow, Violation, WindowRow, time};
use crate::judge::Verdict;

/// The fill of premature retries.
const PREMATURE: &str = "#d7191c";
/// The fill of compliant retries.
const COMPLIANT: &str = "#1a9641";
/// The fill of retries without backoff after no hint (warnings).
const NO_BACKOFF: &str = "#f39c12";
/// The fill of windows, from throttle to permitted time.
const WINDOW: &str = "#9ecae1";
/// The fill of minimum-backoff windows: after a malformed hint, or none.
const BACKOFF_WINDOW: &str = "#fdd49e";
/// The fill of windows that never close.
const UNBOUNDED_WINDOW: &str = "#bcbddc";
/// The fill of throttle markers.
const THROTTLE: &str = "#525252";
/// The background of the plot area; no other element uses it (the screenshot check finds
/// the charts by it).
const PAPER: &str = "#eff3fb";
/// Grid lines.
const GRID: &str = "#d5dcea";

/// The chart's width in SVG units (it scales down with the page).
const WIDTH: f64 = 1100.0;
/// The room for lane labels on the left.
const LABELS: f64 = 300.0;
/// The margin on the right.
const RIGHT: f64 = 24.0;
/// Where the plot area ends on the right: a window that never closes is drawn to here.
pub(super) const PLOT_END: f64 = WIDTH - RIGHT;
/// The height of one lane (one method and URL).
const LANE: f64 = 30.0;
/// The room for the time axis below the lanes.
const AXIS: f64 = 26.0;

/// The most clients given a chart, and lanes per chart; the rest are counted in a note.
const MAX_CLIENTS: usize = 50;
const MAX_LANES: usize = 20;
/// The most violations listed in the table.
const MAX_ROWS: usize = 200;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::with_capacity(32 * 1024);
    // Writing to a String cannot fail.
    let _ = write(&mut out, report);
    out
}

fn write(out: &mut String, report: &Report) -> fmt::Result {
    let verdict = Headline::of(report).mark;
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, r#"<html lang="en">"#)?;
    writeln!(out, "<head>")?;
    writeln!(out, r#"<meta charset="utf-8">"#)?;
    writeln!(
        out,
        r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#
    )?;
    writeln!(out, r#"<meta name="generator" content="holdoff">"#)?;
    writeln!(out, "<title>holdoff report: {verdict}</title>")?;
    writeln!(out, "<style>{CSS}</style>")?;
    writeln!(out, "</head>")?;
    writeln!(out, "<body>")?;
    writeln!(out, "<main>")?;
    header(out, report)?;
    not_tested(out, report)?;
    stats(out, report)?;
    timelines(out, report)?;
    histogram(out, report)?;
    violations(out, report)?;
    warnings(out, report)?;
    herds(out, report)?;
    run_details(out, report)?;
    writeln!(out, "</main>")?;
    writeln!(out, "</body>")?;
    writeln!(out, "</html>")
}

const CSS: &str = r#"
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #1f2328;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1140px; margin: 0 auto; padding: 16px 20px 48px; }
h1 { font-size: 1.5rem; margin: 0; }
h2 { font-size: 1.15rem; margin: 2rem 0 .6rem; border-bottom: 1px solid #e4e7ec; padding-bottom: .3rem; }
.verdict { border-radius: 8px; padding: 14px 18px; display: flex; gap: 16px; align-items: center; }
.verdict .mark { font-size: 1.6rem; font-weight: 700; letter-spacing: .04em; }
.verdict.pass { background: #e6f4ea; color: #14532d; border: 1px solid #a7d7b5; }
.verdict.fail { background: #fbeaea; color: #7a1111; border: 1px solid #e8b4b4; }
.verdict.untested, .verdict.unsure { background: #fff4e0; color: #6b4200; border: 1px solid #f0c987; }
td.why { font-size: .85rem; }
.note { color: #57606a; font-size: .9rem; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr)); gap: 10px; margin-top: 14px; }
.stat { border: 1px solid #e4e7ec; border-radius: 8px; padding: 8px 12px; }
.stat .n { font-size: 1.35rem; font-weight: 600; display: block; }
.stat .what { color: #57606a; font-size: .85rem; }
figure { margin: 0 0 18px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
figcaption .counts { font-weight: 400; color: #57606a; font-size: .9rem; }
svg { max-width: 100%; height: auto; display: block; font-family: inherit; }
svg text { font-size: 12px; fill: #3d444d; }
.legend { display: flex; gap: 18px; flex-wrap: wrap; align-items: center; font-size: .9rem; color: #3d444d; margin-bottom: 10px; }
.legend svg { display: inline-block; vertical-align: middle; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #eaecef; vertical-align: top; }
th { background: #f6f8fa; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.url { word-break: break-all; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; }
dt { color: #57606a; }
dd { margin: 0; word-break: break-all; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
"#;

fn header(out: &mut String, report: &Report) -> fmt::Result {
    let headline = Headline::of(report);
    writeln!(
        out,
        r#"<header class="verdict {}" id="verdict"><span class="mark">{} {}</span><div><h1>{}.</h1><div class="note">{}.</div></div></header>"#,
        headline.class,
        headline.symbol,
        xml(headline.mark),
        xml(&capitalise(&headline.what)),
        xml(&format!(
            "{} compliant, {} premature, {} read as zero, {} without backoff; {}; {}",
            report.retries.compliant,
            report.retries.premature,
            report.retries.read_as_zero,
            report.retries.no_backoff,
            count(
                report.throttled,
                "throttled response",
                "throttled responses"
            ),
            count(
                usize::try_from(report.requests).unwrap_or(usize::MAX),
                "request",
                "requests"
            ),
        )),
    )?;
    if !report.complete {
        writeln!(
            out,
            r#"<p class="note">The event log has no finish event: the run was cut short, and the counts may be partial.</p>"#
        )?;
    }
    Ok(())
}

/// `s` with its first letter in upper case.
fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// When no request reached the proxy: why that usually is, and the fixes.
fn not_tested(out: &mut String, report: &Report) -> fmt::Result {
    if report.interception_failures > 0 {
        writeln!(out, r#"<section id="unintercepted">"#)?;
        writeln!(out, "<h2>Interceptions failed</h2>")?;
        writeln!(
            out,
            "<p>{}</p>",
            html_with_code(&unintercepted(report.interception_failures))
        )?;
        writeln!(out, "</section>")?;
    }
    match Case::of(report) {
        Case::NotTested { allowed: false } => {
            writeln!(out, r#"<section id="not-tested">"#)?;
            writeln!(out, "<h2>Nothing was tested</h2>")?;
            writeln!(
                out,
                r#"<p>No request reached the proxy, so no retry was judged: this is not a pass. The command's HTTP clients bypassed the proxy, or sent nothing. The usual causes:</p>"#
            )?;
            writeln!(out, "<ul>")?;
            for (cause, fix) in NO_TRAFFIC_CAUSES {
                writeln!(
                    out,
                    r#"<li class="cause"><strong>{}</strong>: {}</li>"#,
                    html_with_code(cause),
                    html_with_code(fix)
                )?;
            }
            writeln!(out, "</ul>")?;
            writeln!(out, "</section>")
        }
        _ => Ok(()),
    }
}

fn stats(out: &mut String, report: &Report) -> fmt::Result {
    let by_hint = report.throttled_by_hint;
    let mut stats = vec![
        (report.requests.to_string(), "requests"),
        (report.throttled.to_string(), "throttled responses"),
    ];
    for (n, what) in [
        (by_hint.malformed, "throttled with a malformed hint"),
        (by_hint.none, "throttled with no hint"),
        (by_hint.unbounded, "throttled beyond the clock's range"),
    ] {
        if n > 0 {
            stats.push((n.to_string(), what));
        }
    }
    stats.push((report.retries.compliant.to_string(), "compliant retries"));
    stats.push((report.retries.premature.to_string(), "premature retries"));
    if report.retries.read_as_zero > 0 || by_hint.malformed > 0 {
        stats.push((report.retries.read_as_zero.to_string(), "read as zero"));
    }
    if report.retries.no_backoff > 0 || by_hint.none > 0 {
        stats.push((
            report.retries.no_backoff.to_string(),
            "without backoff (no hint)",
        ));
    }
    stats.push((report.herds.len().to_string(), "herds"));
    if let Some(l) = report.lateness {
        stats.push((millis(l.p50_ms), "median lateness"));
        stats.push((millis(l.max_ms), "latest compliant retry"));
    }
    writeln!(out, r#"<section class="stats" id="counts">"#)?;
    for (n, what) in stats {
        writeln!(
            out,
            r#"<div class="stat"><span class="n">{}</span><span class="what">{what}</span></div>"#,
            xml(&n)
        )?;
    }
    writeln!(out, "</section>")
}

/// Where a time falls on the charts' x axis.
struct Scale {
    start: SystemTime,
    span_ms: f64,
}

impl Scale {
    fn x(&self, at: SystemTime) -> f64 {
        let ms = time::millis_between(self.start, at).clamp(0.0, self.span_ms);
        LABELS + ms / self.span_ms * (WIDTH - LABELS - RIGHT)
    }

    /// Tick positions (milliseconds from the start) at a round step, about eight of them.
    fn ticks(&self) -> (f64, Vec<f64>) {
        let rough = self.span_ms / 8.0;
        let magnitude = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| *s >= rough)
            .unwrap_or(10.0 * magnitude)
            .max(1.0);
        let n = (self.span_ms / step).floor() as usize;
        (step, (0..=n).map(|i| i as f64 * step).collect())
    }
}

/// A tick label: `+0`, `+250 ms`, `+2 s`, `+1.5 s`.
fn tick_label(ms: f64, step: f64) -> String {
    if ms == 0.0 {
        "+0".to_owned()
    } else if step < 1000.0 {
        format!("+{ms:.0} ms")
    } else if step % 1000.0 == 0.0 {
        format!("+{:.0} s", ms / 1000.0)
    } else {
        format!("+{:.1} s", ms / 1000.0)
    }
}

/// One lane of a client's chart: its windows and retries on one method and URL.
#[derive(Default)]
struct Lane<'a> {
    windows: Vec<&'a WindowRow>,
    retries: Vec<&'a RetryRow>,
}

fn timelines(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, r#"<section id="timelines">"#)?;
    writeln!(out, "<h2>Timeline per client</h2>")?;
    let Some((start, end)) = report.span() else {
        writeln!(
            out,
            r#"<p class="note">Nothing was recorded.</p></section>"#
        )?;
        return Ok(());
    };
    let span_ms = time::millis_between(start, end).max(1000.0);
    let scale = Scale { start, span_ms };
    // Client → request → lane.
    let mut clients: BTreeMap<&str, BTreeMap<(&str, &str), Lane<'_>>> = BTreeMap::new();
    for w in &report.windows {
        let lanes = clients.entry(&w.client).or_default();
        lanes
            .entry((&w.url, &w.method))
            .or_default()
            .windows
            .push(w);
    }
    for r in &report.all_retries {
        let lanes = clients.entry(&r.client).or_default();
        lanes
            .entry((&r.url, &r.method))
            .or_default()
            .retries
            .push(r);
    }
    if clients.is_empty() {
        writeln!(
            out,
            r#"<p class="note">No client was throttled, so there is nothing to draw.</p></section>"#
        )?;
        return Ok(());
    }
    writeln!(
        out,
        r#"<p class="note">Time runs left to right from {} (UTC); each lane is one request a client made.</p>"#,
        time::format(start)
    )?;
    let omitted = report.omitted;
    if omitted.timeline_windows + omitted.timeline_retries > 0 {
        writeln!(
            out,
            r#"<p class="note">The timeline draws the first {} windows and the first {} retries; {} windows and {} retries after them are counted in the figures above but not drawn (the event log has them all).</p>"#,
            super::TIMELINE_ROWS,
            super::TIMELINE_ROWS,
            omitted.timeline_windows,
            omitted.timeline_retries,
        )?;
    }
    legend(out)?;
    for (i, (client, lanes)) in clients.iter().take(MAX_CLIENTS).enumerate() {
        chart(out, report, i, client, lanes, &scale)?;
    }
    if clients.len() > MAX_CLIENTS {
        writeln!(
            out,
            r#"<p class="note">And {} more clients, not drawn (the JSON report has them all).</p>"#,
            clients.len() - MAX_CLIENTS
        )?;
    }
    writeln!(out, "</section>")
}

fn legend(out: &mut String) -> fmt::Result {
    writeln!(
        out,
        r#"<div class="legend" aria-hidden="true"><span><svg width="14" height="14" viewBox="0 0 14 14"><path d="M2,2 h10 l-5,9 z" fill="{THROTTLE}"/></svg>throttled</span><span><svg width="30" height="14" viewBox="0 0 30 14"><rect x="0" y="3" width="30" height="8" fill="{WINDOW}"/></svg>waiting until the permitted time</span><span><svg width="30" height="14" viewBox="0 0 30 14"><rect x="0" y="3" width="30" height="8" fill="{BACKOFF_WINDOW}"/></svg>minimum backoff (malformed or no hint)</span><span><svg width="30" height="14" viewBox="0 0 30 14"><rect x="0" y="3" width="30" height="8" fill="{UNBOUNDED_WINDOW}"/></svg>a window that never closes</span><span><svg width="14" height="14" viewBox="0 0 14 14"><circle cx="7" cy="7" r="6" fill="{PREMATURE}"/></svg>premature or read-as-zero retry</span><span><svg width="14" height="14" viewBox="0 0 14 14"><circle cx="7" cy="7" r="6" fill="{NO_BACKOFF}"/></svg>no backoff (warning)</span><span><svg width="14" height="14" viewBox="0 0 14 14"><circle cx="7" cy="7" r="6" fill="{COMPLIANT}"/></svg>compliant retry</span></div>"#
    )
}

fn chart(
    out: &mut String,
    report: &Report,
    index: usize,
    client: &str,
    lanes: &BTreeMap<(&str, &str), Lane<'_>>,
    scale: &Scale,
) -> fmt::Result {
    let drawn = lanes.len().min(MAX_LANES);
    let plot_height = drawn as f64 * LANE;
    let height = plot_height + AXIS;
    let (mut premature, mut read_as_zero, mut no_backoff, mut compliant, mut throttles) =
        (0, 0, 0, 0, 0);
    let mut agents = std::collections::BTreeSet::new();
    for lane in lanes.values().take(MAX_LANES) {
        throttles += lane.windows.iter().filter(|w| w.status.is_some()).count();
        agents.extend(lane.windows.iter().filter_map(|w| w.user_agent.as_deref()));
        for r in &lane.retries {
            agents.extend(r.user_agent.as_deref());
            match r.verdict {
                Verdict::Premature => premature += 1,
                Verdict::ReadAsZero => read_as_zero += 1,
                Verdict::NoBackoff => no_backoff += 1,
                _ => compliant += 1,
            }
        }
    }
    let client_x = xml(client);
    let agents = match agents.len() {
        0 => String::new(),
        _ => format!(
            r#" <span class="agents">· {}</span>"#,
            xml(&agents.into_iter().collect::<Vec<_>>().join(", "))
        ),
    };
    writeln!(out, r#"<figure class="client" id="client-{index}">"#)?;
    writeln!(
        out,
        r#"<figcaption>{client_x}{agents} <span class="counts">— {}, {premature} premature, {read_as_zero} read as zero, {no_backoff} without backoff, {compliant} compliant</span></figcaption>"#,
        count(throttles, "throttle", "throttles"),
    )?;
    writeln!(
        out,
        r#"<svg class="timeline" id="timeline-{index}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="Timeline of {client_x}" data-client="{client_x}" data-premature="{premature}" data-read-as-zero="{read_as_zero}" data-no-backoff="{no_backoff}" data-compliant="{compliant}">"#
    )?;
    let plot_width = WIDTH - LABELS - RIGHT;
    writeln!(
        out,
        r#"<rect class="paper" x="{LABELS}" y="0" width="{plot_width}" height="{plot_height}" fill="{PAPER}"/>"#
    )?;
    let (step, ticks) = scale.ticks();
    writeln!(out, r#"<g class="grid">"#)?;
    for ms in &ticks {
        let x = LABELS + ms / scale.span_ms * plot_width;
        writeln!(
            out,
            r#"<line x1="{x:.1}" y1="0" x2="{x:.1}" y2="{plot_height}" stroke="{GRID}" stroke-width="1"/>"#
        )?;
    }
    writeln!(out, "</g>")?;
    for (row, ((url, method), lane)) in lanes.iter().take(MAX_LANES).enumerate() {
        let y = row as f64 * LANE + LANE / 2.0;
        lane_svg(out, report, y, method, url, lane, scale)?;
    }
    writeln!(out, r#"<g class="axis">"#)?;
    for ms in &ticks {
        let x = LABELS + ms / scale.span_ms * plot_width;
        writeln!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            plot_height + 17.0,
            tick_label(*ms, step)
        )?;
    }
    writeln!(out, "</g>")?;
    writeln!(out, "</svg>")?;
    if lanes.len() > MAX_LANES {
        writeln!(
            out,
            r#"<p class="note">And {} more requests by this client, not drawn.</p>"#,
            lanes.len() - MAX_LANES
        )?;
    }
    writeln!(out, "</figure>")
}

/// A throttle's marker and its window: to the permitted time (the hint's, or the minimum
/// backoff's), or to the end of the chart when it never closes.
fn window_svg(out: &mut String, y: f64, w: &WindowRow, scale: &Scale) -> fmt::Result {
    let x1 = scale.x(w.from);
    let (x2, class, fill) = match (w.to, w.hint) {
        (None, _) | (_, Some(HintKind::Unbounded)) => {
            (PLOT_END, "window unbounded", UNBOUNDED_WINDOW)
        }
        (Some(to), Some(HintKind::Malformed)) => (scale.x(to), "window malformed", BACKOFF_WINDOW),
        (Some(to), Some(HintKind::None)) => (scale.x(to), "window no-hint", BACKOFF_WINDOW),
        (Some(to), _) => (scale.x(to), "window", WINDOW),
    };
    let until = match w.to {
        Some(to) => format!(
            "retry permitted at {} ({} later)",
            time::format(to),
            millis(time::millis_between(w.from, to))
        ),
        None => "a window that never closes".to_owned(),
    };
    let mut title = match w.status {
        Some(status) => format!("{status} at {}; {until}", time::format(w.from)),
        None => format!("window from {}; {until}", time::format(w.from)),
    };
    if let Some(judged_by) = &w.judged_by {
        title.push_str("; judged by ");
        title.push_str(&judged_by.plain());
    }
    let hint = w.hint.map_or("unknown", HintKind::as_str);
    writeln!(
        out,
        r#"<rect class="{class}" data-hint="{hint}" x="{x1:.1}" y="{:.1}" width="{:.1}" height="8" fill="{fill}"><title>{}</title></rect>"#,
        y - 4.0,
        (x2 - x1).max(1.0),
        xml(&title),
    )?;
    if w.status.is_some() {
        writeln!(
            out,
            r#"<path class="throttle" d="M{:.1},{:.1} h10 l-5,8 z" fill="{THROTTLE}"/>"#,
            x1 - 5.0,
            y - 14.0,
        )?;
    }
    Ok(())
}

fn lane_svg(
    out: &mut String,
    report: &Report,
    y: f64,
    method: &str,
    url: &str,
    lane: &Lane<'_>,
    scale: &Scale,
) -> fmt::Result {
    let request = format!("{method} {url}");
    writeln!(out, r#"<g class="lane" data-request="{}">"#, xml(&request))?;
    writeln!(
        out,
        r#"<text class="label" x="{:.1}" y="{:.1}" text-anchor="end"><title>{}</title>{}</text>"#,
        LABELS - 8.0,
        y + 4.0,
        xml(&request),
        xml(&truncate(&request, 44)),
    )?;
    for w in &lane.windows {
        window_svg(out, y, w, scale)?;
    }
    for r in &lane.retries {
        let (class, fill, title) = match r.verdict {
            Verdict::Compliant => (
                "retry compliant",
                COMPLIANT,
                format!(
                    "compliant retry at {}: {} after the permitted time",
                    time::format(r.retried_at),
                    r.by_ms.map_or_else(|| "?".to_owned(), millis)
                ),
            ),
            verdict => {
                let window = r.window.map(|i| &report.windows[i]);
                let why = super::text::why(r, window);
                let (class, fill) = match verdict {
                    Verdict::ReadAsZero => ("retry read-as-zero", PREMATURE),
                    Verdict::NoBackoff => ("retry no-backoff", NO_BACKOFF),
                    _ => ("retry premature", PREMATURE),
                };
                (
                    class,
                    fill,
                    format!(
                        "{} retry at {}: {why}",
                        verdict.as_str().replace('_', " "),
                        time::format(r.retried_at)
                    ),
                )
            }
        };
        writeln!(
            out,
            r##"<circle class="{class}" cx="{:.1}" cy="{y:.1}" r="6" fill="{fill}" stroke="#fff" stroke-width="1"><title>{}</title></circle>"##,
            scale.x(r.retried_at),
            xml(&title),
        )?;
    }
    writeln!(out, "</g>")
}

/// The histogram bucket a compliant retry `ms` late falls in.
pub(super) fn bucket(ms: f64) -> usize {
    BUCKETS
        .iter()
        .position(|(upper, _)| ms < *upper)
        .unwrap_or(BUCKET_COUNT - 1)
}

/// How many lateness buckets the histogram has.
pub(super) const BUCKET_COUNT: usize = 10;

/// Lateness buckets: upper bounds in milliseconds, and labels.
const BUCKETS: [(f64, &str); BUCKET_COUNT] = [
    (10.0, "< 10 ms"),
    (50.0, "10–50 ms"),
    (100.0, "50–100 ms"),
    (250.0, "100–250 ms"),
    (500.0, "250–500 ms"),
    (1000.0, "0.5–1 s"),
    (2000.0, "1–2 s"),
    (5000.0, "2–5 s"),
    (10_000.0, "5–10 s"),
    (f64::INFINITY, "≥ 10 s"),
];

fn histogram(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, r#"<section id="lateness">"#)?;
    writeln!(out, "<h2>How late compliant retries came</h2>")?;
    let counts = report.late_buckets;
    if counts.iter().all(|&n| n == 0) {
        writeln!(
            out,
            r#"<p class="note">No compliant retries.</p></section>"#
        )?;
        return Ok(());
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    let (width, height, bottom, top) = (WIDTH, 240.0, 40.0, 20.0);
    let slot = (width - 40.0) / BUCKETS.len() as f64;
    let plot = height - bottom - top;
    if let Some(l) = report.lateness {
        writeln!(
            out,
            r#"<p class="note">Time from the permitted time to the retry, for {}: median {}, 90th percentile {}, latest {}. Right at zero is what a client without jitter does.</p>"#,
            count(l.count, "compliant retry", "compliant retries"),
            millis(l.p50_ms),
            millis(l.p90_ms),
            millis(l.max_ms),
        )?;
    }
    writeln!(
        out,
        r#"<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Histogram of how late compliant retries came">"#
    )?;
    writeln!(
        out,
        r##"<line x1="20" y1="{0}" x2="{1}" y2="{0}" stroke="#8c959f"/>"##,
        height - bottom,
        width - 20.0
    )?;
    for (i, ((_, label), n)) in BUCKETS.iter().zip(counts).enumerate() {
        let x = 20.0 + i as f64 * slot;
        let h = n as f64 / most as f64 * plot;
        let y = height - bottom - h;
        writeln!(
            out,
            r#"<rect class="bar" x="{:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{COMPLIANT}" data-count="{n}"><title>{label}: {n}</title></rect>"#,
            x + 6.0,
            slot - 12.0,
        )?;
        if n > 0 {
            writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{n}</text>"#,
                x + slot / 2.0,
                y - 5.0
            )?;
        }
        writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            x + slot / 2.0,
            height - bottom + 18.0
        )?;
    }
    writeln!(out, "</svg>")?;
    writeln!(out, "</section>")
}

fn violations(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, r#"<section id="violations">"#)?;
    writeln!(out, "<h2>Violations, the most premature first</h2>")?;
    let worst = report.worst();
    if worst.is_empty() {
        writeln!(out, r#"<p class="note">None.</p></section>"#)?;
        return Ok(());
    }
    table(out, report, &worst, "violation", report.omitted.violations)?;
    writeln!(out, "</section>")
}

fn warnings(out: &mut String, report: &Report) -> fmt::Result {
    if report.warnings.is_empty() {
        return Ok(());
    }
    writeln!(out, r#"<section id="warnings">"#)?;
    writeln!(
        out,
        "<h2>Warnings: retries without backoff after a throttle with no hint</h2>"
    )?;
    writeln!(
        out,
        r#"<p class="note">RFC 9110 names no wait for a throttle without Retry-After, so these do not fail the run; a client should still back off, with jitter.</p>"#
    )?;
    let warnings: Vec<&Violation> = report.warnings.iter().collect();
    table(out, report, &warnings, "warning", report.omitted.warnings)?;
    writeln!(out, "</section>")
}

/// A table of violations or warnings (rows of class `class`), with why each is one and how
/// its hint was read; then how many more there are, `left_out` of them not in any report.
fn table(
    out: &mut String,
    report: &Report,
    rows: &[&Violation],
    class: &str,
    left_out: usize,
) -> fmt::Result {
    let times = report.times();
    writeln!(out, r#"<p class="note">{}.</p>"#, xml(&times.note()))?;
    writeln!(
        out,
        r#"<table><thead><tr><th>Client</th><th>Request</th><th>Kind</th><th class="num">Early by</th><th>Throttled at</th><th>Retried at</th><th>Permitted at</th><th>Why</th></tr></thead><tbody>"#
    )?;
    for v in rows.iter().take(MAX_ROWS) {
        let mut why = html_with_code(&v.why);
        // After no hint, the sentence says all there is.
        if let Some(judged_by) = v.judged_by.as_ref().filter(|j| j.hint != HintKind::None) {
            why.push_str("; judged by ");
            why.push_str(&judged_by_html(judged_by));
        }
        writeln!(
            out,
            r#"<tr class="{class}" data-kind="{}"><td>{}</td><td class="url">{} {}</td><td>{}</td><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="why">{why}</td></tr>"#,
            v.kind.as_str(),
            xml(&client_label(&v.client, v.user_agent.as_deref())),
            xml(&v.method),
            xml(&v.url),
            v.kind.as_str().replace('_', " "),
            v.early_by_ms.map_or_else(|| "∞".to_owned(), millis),
            times.show(v.throttled_at),
            times.show(v.retried_at),
            v.permitted_at
                .map_or_else(|| "never".to_owned(), |at| times.show(at)),
        )?;
    }
    writeln!(out, "</tbody></table>")?;
    if rows.len() > MAX_ROWS {
        writeln!(
            out,
            r#"<p class="note">And {} more (the JSON report lists them{}).</p>"#,
            rows.len() - MAX_ROWS,
            if left_out > 0 {
                ", the earliest"
            } else {
                " all"
            }
        )?;
    }
    if let Some(note) = Report::unlisted(left_out) {
        writeln!(out, r#"<p class="note">{}.</p>"#, xml(&note))?;
    }
    Ok(())
}

/// How a hint was read, in HTML: the header and value as code.
fn judged_by_html(judged_by: &JudgedBy) -> String {
    let how = xml(&judged_by.how()).into_owned();
    match judged_by.code() {
        Some(code) => judged_by.join(&format!("<code>{}</code>", xml(&code)), &how),
        None => how,
    }
}

fn herds(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, r#"<section id="herds">"#)?;
    writeln!(out, "<h2>Herds</h2>")?;
    if report.herds.is_empty() {
        writeln!(
            out,
            r#"<p class="note">None: no two clients resumed within {} of each other at the same permitted time.</p></section>"#,
            millis(super::RESUME_SPREAD.as_secs_f64() * 1000.0)
        )?;
        return Ok(());
    }
    let times = report.times();
    writeln!(out, "<ul>")?;
    for herd in &report.herds {
        writeln!(
            out,
            r#"<li class="herd">{}. {}</li>"#,
            xml(&herd.describe(&times.show(herd.permitted_at))),
            herd.advice(),
        )?;
    }
    writeln!(out, "</ul>")?;
    writeln!(out, "</section>")
}

fn run_details(out: &mut String, report: &Report) -> fmt::Result {
    writeln!(out, r#"<section id="run">"#)?;
    writeln!(out, "<h2>The run</h2>")?;
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(at) = report.started_at {
        rows.push(("Started", time::format(at)));
    }
    if let Some(at) = report.finished_at {
        rows.push(("Finished", time::format(at)));
    }
    if let Some(ms) = report.duration_ms {
        rows.push(("Duration", millis(ms)));
    }
    if let Some(source) = &report.source {
        rows.push(("Faults from", source.clone()));
    }
    if let Some(seed) = report.seed {
        rows.push(("Seed", seed.to_string()));
    }
    if let Some(faults) = &report.faults {
        rows.push(("Faults injected", faults_line(faults)));
    }
    if let Some(command) = &report.command {
        rows.push(("Command", shell_words(command)));
    }
    rows.push(("Reproduce", report.reproduce().to_owned()));
    if !report.user_agents.is_empty() {
        rows.push(("User-Agents", report.user_agents.join(", ")));
    }
    if let Some(code) = report.exit_code {
        rows.push(("Command exit status", code.to_string()));
    }
    if let Some(url) = &report.proxy_url {
        rows.push(("Proxy", url.clone()));
    }
    if let Some(key) = &report.judge_key {
        rows.push(("Windows keyed by", key.clone()));
    }
    writeln!(out, "<dl>")?;
    for (what, value) in rows {
        writeln!(out, "<dt>{what}</dt><dd>{}</dd>", xml(&value))?;
    }
    writeln!(out, "</dl>")?;
    writeln!(out, "</section>")
}
