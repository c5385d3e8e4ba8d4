//! Parses one value 100,000 times with holdoff or httpdate, for instruction counts that do not
//! depend on how noisy the machine is:
//!
//! ```sh
//! cargo build --release -p holdoff --example parse_loop
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/parse_loop holdoff 'Sunday, 06-Nov-94 08:49:37 GMT'
//! ```
//!
//! Subtract the `none` run (the loop alone) and divide by 100,000 for instructions per parse.

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(which), Some(input)) = (args.next(), args.next()) else {
        eprintln!("usage: parse_loop holdoff|retry-after|httpdate|none VALUE");
        std::process::exit(2);
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_795_996_800);
    for _ in 0..100_000 {
        let ok = match which.as_str() {
            "holdoff" => {
                holdoff::HttpDate::parse(black_box(input.as_bytes()), black_box(now)).is_ok()
            }
            "retry-after" => {
                holdoff::RetryAfter::parse(black_box(input.as_bytes()), black_box(now)).is_ok()
            }
            "httpdate" => httpdate::parse_http_date(black_box(&input)).is_ok(),
            _ => true,
        };
        black_box(ok);
    }
}
