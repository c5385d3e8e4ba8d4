//! The open windows with their client, method and URL: the judge keeps only a digest of
//! each key, so [`WindowBook`] writes down, for each throttled response, what the key was
//! made of, and reads the times back from the judge.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use holdoff::Receipt;
use http::{Request, Response};

use super::wall_of;
use crate::body::Body;
use crate::judge::{Judge, KeyMode, WindowKey, WindowTimes};
use crate::proxy::{Action, Notes, RequestMeta, Stage};

/// How many windows a [`WindowBook`] labels at most, by default.
const CAPACITY: usize = 10_000;

/// One open window, as `/windows` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowInfo {
    /// Who was throttled (`ClientId`'s display form).
    pub client: String,
    /// The throttled request's method.
    pub method: String,
    /// Its URL.
    pub url: String,
    /// When the throttled response passed to the client (wall clock).
    pub throttled_at: SystemTime,
    /// When a retry is permitted (wall clock).
    pub permitted_at: SystemTime,
    /// How long until then; zero once the permitted time has passed and the window waits
    /// for a late (compliant) retry.
    pub remaining: Duration,
}

/// Anything that can list the open windows, for `/windows`.
///
/// [`WindowBook`] is one; a judge that kept its windows' labels itself could be another.
pub trait OpenWindows: Send + Sync + 'static {
    /// The windows open at `now`, soonest permitted first.
    fn open_windows(&self, now: Receipt) -> Vec<WindowInfo>;
}

/// A pipeline stage that labels the judge's open windows with the client, method and URL
/// they were opened for, so that [`Control`](crate::Control) can list them.
///
/// Put it **before** the judge (e.g. right after [`MetricsStage`](super::MetricsStage)), so
/// that it sees every throttled response, the faults' included. It looks only at responses
/// of status 400 or more that carry a hint header (`Retry-After`, rate-limit fields): for
/// each it computes the window key exactly as the judge does and, when the key is new,
/// writes down the labels (three strings). Other responses cost a status check. In
/// [`KeyMode::Header`] it also keeps each request's header value until its response, as the
/// judge does.
///
/// The times come from the judge when the windows are listed, so a window the judge closed
/// or evicted disappears from the book then. At most 10,000 windows are labelled; past that,
/// closed windows are swept, and if the book is still full new windows go unlabelled (and
/// are counted, see [`WindowBook::unlabelled`]). A sweep looks up only the windows that may
/// have closed since it last looked: each at its permitted time, then after as long again as
/// it has been past it (from a second to a minute). So noting a window costs `O(log n)`, plus
/// at most one lookup per open window per second however many windows are noted, and a window
/// closed by a late retry may keep its label that long.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use holdoff::clock::{Clock, TokioClock};
/// use holdoff_proxy::WindowBook;
/// use holdoff_proxy::judge::{Judge, KeyMode};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let judge = Arc::new(Judge::new(KeyMode::default(), TokioClock.now()));
/// let book = Arc::new(WindowBook::new(judge));
/// assert_eq!(book.unlabelled(), 0);
/// # }
/// ```
pub struct WindowBook {
    judge: Arc<Judge>,
    capacity: usize,
    book: Mutex<Book>,
    unlabelled: AtomicU64,
}

/// The labels, indexed twice: by key, and by when to ask the judge about the window again.
/// Every labelled key is in both maps, once.
#[derive(Default)]
struct Book {
    labels: HashMap<WindowKey, Entry>,
    /// Soonest first; the sequence number tells apart keys due at the same instant.
    due: BTreeMap<Due, WindowKey>,
    seq: u64,
    /// How many windows sweeps have looked up in the judge: the work they did.
    looked_up: u64,
}

/// When to look a labelled window up again, and a sequence number.
type Due = (Instant, u64);

/// One labelled window.
struct Entry {
    labels: Labels,
    /// Its place in [`Book::due`].
    due: Due,
}

/// What a window key was made of.
struct Labels {
    client: Box<str>,
    method: Box<str>,
    url: Box<str>,
}

/// The least and the most a sweep waits before it looks an open window up again.
const RECHECK_MIN: Duration = Duration::from_secs(1);
const RECHECK_MAX: Duration = Duration::from_secs(60);

impl WindowBook {
    /// A book of `judge`'s windows, keyed by its mode.
    pub fn new(judge: Arc<Judge>) -> WindowBook {
        WindowBook::with_capacity(judge, CAPACITY)
    }

    /// A book labelling at most `capacity` windows.
    pub fn with_capacity(judge: Arc<Judge>, capacity: usize) -> WindowBook {
        WindowBook {
            judge,
            capacity,
            book: Mutex::default(),
            unlabelled: AtomicU64::new(0),
        }
    }

    /// Windows that went unlabelled because the book was full of open ones.
    pub fn unlabelled(&self) -> u64 {
        self.unlabelled.load(Ordering::Relaxed)
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key the judge files the request under, computed the same way.
    fn key(&self, meta: &RequestMeta, header: Option<&str>) -> WindowKey {
        self.judge.key_for(meta, header)
    }

    fn note(&self, meta: &RequestMeta, header: Option<&str>) {
        let key = self.key(meta, header);
        let now = meta.received.instant;
        let mut book = self.book();
        if book.labels.contains_key(&key) {
            return;
        }
        if book.labels.len() >= self.capacity {
            book.sweep(&self.judge, now);
            if book.labels.len() >= self.capacity {
                self.unlabelled.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        // The judge has opened the window by now (it sits after the book, so it sees the
        // response first); were it not there, the next sweep looks again.
        let at = self
            .judge
            .window(key)
            .map_or(now, |times| recheck_at(times, now));
        let labels = Labels {
            client: meta.client.to_string().into(),
            method: meta.method.as_str().into(),
            url: meta.target.to_string().into(),
        };
        book.insert(key, labels, at);
    }
}

impl Book {
    fn insert(&mut self, key: WindowKey, labels: Labels, at: Instant) {
        let due = self.next_due(at);
        self.due.insert(due, key);
        self.labels.insert(key, Entry { labels, due });
    }

    fn next_due(&mut self, at: Instant) -> Due {
        self.seq += 1;
        (at, self.seq)
    }

    /// Drops the labels of windows the judge no longer has, looking up only those due by
    /// `now`; the ones still open are due again later.
    fn sweep(&mut self, judge: &Judge, now: Instant) {
        let mut open = Vec::new();
        while let Some(first) = self.due.first_entry() {
            if first.key().0 > now {
                break;
            }
            let key = first.remove();
            self.looked_up += 1;
            match judge.window(key) {
                Some(times) => open.push((key, recheck_at(times, now))),
                None => {
                    self.labels.remove(&key);
                }
            }
        }
        for (key, at) in open {
            let due = self.next_due(at);
            self.due.insert(due, key);
            if let Some(entry) = self.labels.get_mut(&key) {
                entry.due = due;
            }
        }
    }
}

/// When to look up again a window open at `now`. A retry can close it from its permitted time
/// on, at any time until the judge evicts it: waiting until then, then as long as it has been
/// past that time (within [`RECHECK_MIN`] and [`RECHECK_MAX`]), looks a window up at most once
/// a second, and once a minute when it is long past, however many windows are noted.
fn recheck_at(times: WindowTimes, now: Instant) -> Instant {
    let wait = match times.permitted_at.checked_duration_since(now) {
        Some(until) if !until.is_zero() => until,
        _ => now.saturating_duration_since(times.permitted_at),
    };
    now.checked_add(wait.clamp(RECHECK_MIN, RECHECK_MAX))
        .unwrap_or(now)
}

impl fmt::Debug for WindowBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowBook")
            .field("labelled", &self.book().labels.len())
            .field("unlabelled", &self.unlabelled())
            .finish_non_exhaustive()
    }
}

impl Stage for WindowBook {
    fn on_request(&self, mut request: Request<Body>, _: &RequestMeta) -> Action {
        if let KeyMode::Header(name) = self.judge.mode() {
            let value = request
                .headers()
                .get(name.as_str())
                .and_then(|value| value.to_str().ok())
                .map(Box::<str>::from);
            if let Some(value) = value {
                Notes::leave(&mut request, BookHeader(value));
            }
        }
        Action::Continue(request)
    }

    fn on_response(&self, response: &mut Response<Body>, meta: &RequestMeta) {
        let header = Notes::take::<BookHeader>(response).map(|note| note.0);
        // The judge opens windows only on these; whether it did is read when listing.
        let hinted = response.status().as_u16() >= 400
            && response
                .headers()
                .keys()
                .any(|name| holdoff::HINT_HEADERS.contains(&name.as_str()));
        if hinted {
            self.note(meta, header.as_deref());
        }
    }
}

/// In header mode: the header's value, as the request had it, for the response's label.
#[derive(Clone)]
struct BookHeader(Box<str>);

impl OpenWindows for WindowBook {
    fn open_windows(&self, now: Receipt) -> Vec<WindowInfo> {
        let mut open = Vec::new();
        let mut closed = Vec::new();
        let mut book = self.book();
        book.labels.retain(|key, entry| {
            let Some(times) = self.judge.window(*key) else {
                closed.push(entry.due);
                return false;
            };
            let labels = &entry.labels;
            open.push(WindowInfo {
                client: labels.client.to_string(),
                method: labels.method.to_string(),
                url: labels.url.to_string(),
                throttled_at: wall_of(now, times.throttled_at),
                permitted_at: wall_of(now, times.permitted_at),
                remaining: times.permitted_at.saturating_duration_since(now.instant),
            });
            true
        });
        for due in closed {
            book.due.remove(&due);
        }
        drop(book);
        open.sort_by(|a, b| {
            (a.permitted_at, &a.client, &a.url).cmp(&(b.permitted_at, &b.client, &b.url))
        });
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use holdoff::clock::{SystemClock, TokioClock};
    use http::{StatusCode, header};

    use super::super::judge::JudgeStage;

    /// Both clocks now.
    fn now() -> Receipt {
        Receipt {
            instant: SystemClock.now(),
            wall: SystemClock.wall_now(),
        }
    }

    fn request(url: &str, tenant: Option<&str>) -> Request<Body> {
        let mut builder = Request::get(url);
        if let Some(tenant) = tenant {
            builder = builder.header("x-tenant", tenant);
        }
        builder.body(Body::empty()).unwrap()
    }

    fn throttled(retry_after: &str) -> Response<Body> {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, retry_after.parse().unwrap());
        response
    }

    /// A request through the book then the judge, and its response back through both.
    fn exchange(
        book: &WindowBook,
        judge: &JudgeStage,
        meta: &RequestMeta,
        tenant: Option<&str>,
        mut response: Response<Body>,
    ) {
        let url = meta.target.to_string();
        // What the handler does: the notes come off the request after each stage.
        let mut notes = crate::proxy::Notes::default();
        let Action::Continue(mut request) = book.on_request(request(&url, tenant), meta) else {
            panic!("the book passes every request on");
        };
        notes.gather(&mut request);
        let mut response = match judge.on_request(request, meta) {
            Action::Continue(mut request) => {
                notes.gather(&mut request);
                notes.deliver(&mut response);
                judge.on_response(&mut response, meta);
                response
            }
            Action::Respond(mut answer) => {
                notes.deliver(&mut answer);
                judge.on_response(&mut answer, meta);
                answer
            }
            other => panic!("unexpected {other:?}"),
        };
        book.on_response(&mut response, meta);
    }

    mod open_windows {
        use super::*;

        #[tokio::test]
        async fn labels_the_window_the_judge_opened_in_every_key_mode() {
            let modes = [
                KeyMode::ClientMethodUrl,
                KeyMode::MethodUrl,
                KeyMode::Url,
                KeyMode::Host,
                KeyMode::Header("x-tenant".into()),
            ];
            for mode in modes {
                let start = now();
                let judge = Arc::new(Judge::new(mode.clone(), start.instant));
                let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
                let book = WindowBook::new(judge);
                let url = "http://API.test:8080/items?page=2";
                let meta = RequestMeta::for_test(1, "alice", url, start);
                exchange(&book, &stage, &meta, Some("acme"), throttled("30"));
                let open = book.open_windows(now());
                assert_eq!(open.len(), 1, "{mode:?}");
                let window = &open[0];
                assert_eq!(window.client, "header:alice");
                assert_eq!(window.method, "GET");
                // The URL in its one form: the host in lowercase, as every spelling keys it.
                assert_eq!(window.url, "http://api.test:8080/items?page=2");
                assert!(window.remaining > Duration::from_secs(29), "{mode:?}");
                assert!(window.remaining <= Duration::from_secs(30), "{mode:?}");
                let wait = window.permitted_at.duration_since(window.throttled_at);
                assert_eq!(wait.ok(), Some(Duration::from_secs(30)), "{mode:?}");
            }
        }

        #[test]
        fn forgets_a_window_the_judge_closed() {
            let start = now();
            let judge = Arc::new(Judge::new(KeyMode::default(), start.instant));
            let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
            let book = WindowBook::new(Arc::clone(&judge));
            let url = "http://api.test/a";
            exchange(
                &book,
                &stage,
                &RequestMeta::for_test(1, "a", url, start),
                None,
                throttled("1"),
            );
            assert_eq!(book.open_windows(start).len(), 1);
            // The retry, two seconds on, is compliant: the window closes.
            let later = Receipt {
                instant: start.instant + Duration::from_secs(2),
                wall: start.wall + Duration::from_secs(2),
            };
            let ok = Response::new(Body::empty());
            exchange(
                &book,
                &stage,
                &RequestMeta::for_test(2, "a", url, later),
                None,
                ok,
            );
            assert!(book.open_windows(later).is_empty());
            assert_eq!(book.book().labels.len(), 0);
        }

        #[test]
        fn a_premature_retry_labels_nothing_new() {
            let start = now();
            let judge = Arc::new(Judge::new(KeyMode::default(), start.instant));
            let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
            let book = WindowBook::new(judge);
            let url = "http://api.test/a";
            exchange(
                &book,
                &stage,
                &RequestMeta::for_test(1, "a", url, start),
                None,
                throttled("60"),
            );
            let ok = Response::new(Body::empty());
            exchange(
                &book,
                &stage,
                &RequestMeta::for_test(2, "a", url, start),
                None,
                ok,
            );
            assert_eq!(book.open_windows(start).len(), 1);
        }

        #[test]
        fn a_full_book_sweeps_closed_windows_then_counts_what_it_cannot_label() {
            let start = now();
            let judge = Arc::new(Judge::new(KeyMode::default(), start.instant));
            let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
            let book = WindowBook::with_capacity(Arc::clone(&judge), 2);
            for (id, path) in [(1, "/a"), (2, "/b"), (3, "/c")] {
                let url = format!("http://api.test{path}");
                exchange(
                    &book,
                    &stage,
                    &RequestMeta::for_test(id, "a", &url, start),
                    None,
                    throttled("60"),
                );
            }
            assert_eq!(judge.open_windows(), 3);
            assert_eq!(book.open_windows(start).len(), 2);
            assert_eq!(book.unlabelled(), 1);
        }
    }

    mod note {
        use super::*;

        /// `n` throttled responses of `wait` seconds for `/0` … `/n-1`, at `at`.
        fn throttle(book: &WindowBook, judge: &JudgeStage, n: u64, at: Receipt, wait: &str) {
            for id in 0..n {
                let url = format!("http://api.test/{id}");
                exchange(
                    book,
                    judge,
                    &RequestMeta::for_test(id, "a", &url, at),
                    None,
                    throttled(wait),
                );
            }
        }

        fn later(start: Receipt, by: Duration) -> Receipt {
            Receipt {
                instant: start.instant + by,
                wall: start.wall + by,
            }
        }

        fn looked_up(book: &WindowBook) -> u64 {
            book.book().looked_up
        }

        #[test]
        fn a_full_book_of_open_windows_looks_up_none_of_them() {
            const N: u64 = 10_000;
            let start = now();
            let judge = Arc::new(Judge::new(KeyMode::default(), start.instant));
            let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
            let book = WindowBook::with_capacity(Arc::clone(&judge), 10_000);
            throttle(&book, &stage, N, start, "60");
            assert_eq!(book.book().labels.len(), 10_000);
            // Each window more, while all are before their permitted time, costs no lookup.
            for id in N..N + 100 {
                let meta = RequestMeta::for_test(id, "a", &format!("http://api.test/{id}"), start);
                exchange(&book, &stage, &meta, None, throttled("60"));
            }
            assert_eq!(looked_up(&book), 0);
            assert_eq!(book.unlabelled(), 100);
            assert_eq!(book.open_windows(start).len(), 10_000);
        }

        #[test]
        fn looks_each_window_up_once_a_period_however_many_are_noted() {
            const N: u64 = 10_000;
            let start = now();
            let judge = Arc::new(Judge::new(KeyMode::default(), start.instant));
            let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
            let book = WindowBook::with_capacity(Arc::clone(&judge), 10_000);
            throttle(&book, &stage, N, start, "60");
            // Past the permitted time, /0 is retried (compliant): its window closes.
            let after = later(start, Duration::from_secs(61));
            let retry = RequestMeta::for_test(N, "a", "http://api.test/0", after);
            exchange(&book, &stage, &retry, None, Response::new(Body::empty()));
            assert_eq!(judge.open_windows(), 9_999);
            // The first new window finds every window due: it looks each up once, drops /0's
            // label and takes its place.
            let url = |id: u64| format!("http://api.test/new/{id}");
            let first = RequestMeta::for_test(N + 1, "a", &url(0), after);
            exchange(&book, &stage, &first, None, throttled("60"));
            assert_eq!(looked_up(&book), 10_000);
            assert_eq!(book.unlabelled(), 0);
            // The next thousand look up nothing: none is due again within the second.
            for id in 1..1_000 {
                let meta = RequestMeta::for_test(N + 1 + id, "a", &url(id), after);
                exchange(&book, &stage, &meta, None, throttled("60"));
            }
            assert_eq!(looked_up(&book), 10_000);
            assert_eq!(book.unlabelled(), 999);
            let open = book.open_windows(after);
            assert_eq!(open.len(), 10_000);
            assert!(open.iter().all(|window| window.url != "http://api.test/0"));
            assert!(open.iter().any(|window| window.url == url(0)));
            let inner = book.book();
            assert_eq!(inner.due.len(), inner.labels.len());
        }

        #[test]
        fn a_listing_drops_closed_windows_from_both_indexes() {
            let start = now();
            let judge = Arc::new(Judge::new(KeyMode::default(), start.instant));
            let stage = JudgeStage::new(Arc::clone(&judge), Arc::new(TokioClock));
            let book = WindowBook::with_capacity(Arc::clone(&judge), 3);
            throttle(&book, &stage, 3, start, "1");
            let after = later(start, Duration::from_secs(2));
            let ok = Response::new(Body::empty());
            exchange(
                &book,
                &stage,
                &RequestMeta::for_test(9, "a", "http://api.test/1", after),
                None,
                ok,
            );
            assert_eq!(book.open_windows(after).len(), 2);
            let inner = book.book();
            assert_eq!((inner.labels.len(), inner.due.len()), (2, 2));
        }
    }
}
