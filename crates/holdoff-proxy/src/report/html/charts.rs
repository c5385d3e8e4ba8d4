//! The page's drawings, which are not text and so not in the document: a timeline chart per
//! client, as inline SVG, and a histogram of how late compliant retries came.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::SystemTime;

use crate::judge::Verdict;
use crate::report::event::HintKind;
use crate::report::parts::{BUCKET_COUNT, RetryRow, WindowRow};
use crate::report::run::Report;
use crate::report::text::{client_name, count, millis, truncate, xml};
use crate::report::time;

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
pub(crate) const PLOT_END: f64 = WIDTH - RIGHT;
/// The height of one lane (one method and URL).
const LANE: f64 = 30.0;
/// The room for the time axis below the lanes.
const AXIS: f64 = 26.0;

/// The most clients given a chart, and lanes per chart; the rest are counted in a note.
const MAX_CLIENTS: usize = 50;
const MAX_LANES: usize = 20;

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

pub(super) fn timelines(out: &mut String, report: &Report) -> fmt::Result {
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
            crate::report::TIMELINE_ROWS,
            crate::report::TIMELINE_ROWS,
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
                // Another process's window, drawn on this lane but no retry of its own.
                Verdict::Sibling => {}
                _ => compliant += 1,
            }
        }
    }
    // The machine form stays in `data-client`, as the JSON report has it.
    let client_x = xml(client);
    let name_x = xml(&client_name(client)).into_owned();
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
        r#"<figcaption>{name_x}{agents} <span class="counts">— {}, {premature} premature, {read_as_zero} read as zero, {no_backoff} without backoff, {compliant} compliant</span></figcaption>"#,
        count(throttles, "throttle", "throttles"),
    )?;
    writeln!(
        out,
        r#"<svg class="timeline" id="timeline-{index}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="Timeline of {name_x}" data-client="{client_x}" data-premature="{premature}" data-read-as-zero="{read_as_zero}" data-no-backoff="{no_backoff}" data-compliant="{compliant}">"#
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
                let why = r.why(window);
                let (class, fill) = match verdict {
                    Verdict::ReadAsZero => ("retry read-as-zero", PREMATURE),
                    Verdict::NoBackoff => ("retry no-backoff", NO_BACKOFF),
                    Verdict::Sibling => ("retry sibling", NO_BACKOFF),
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
pub(crate) fn bucket(ms: f64) -> usize {
    BUCKETS
        .iter()
        .position(|(upper, _)| ms < *upper)
        .unwrap_or(BUCKET_COUNT - 1)
}

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

pub(super) fn histogram(out: &mut String, report: &Report) -> fmt::Result {
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
