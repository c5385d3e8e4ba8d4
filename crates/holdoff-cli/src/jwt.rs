//! `holdoff jwt create`: a bearer token for testing an API that wants one, as Dev Proxy's
//! `devproxy jwt create` makes it (the same options, signed with HMAC-SHA256 with a key of
//! yours or a random one). The control API's `POST /proxy/jwtToken` makes the same tokens.

use std::collections::BTreeMap;
use std::io::Write;

use holdoff::clock::SystemClock;
use holdoff_proxy::jwt::{self, JwtOptions};

use crate::failure::Failure;

/// `holdoff jwt`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print a new JWT (HS256) with the claims asked for.
    Create(CreateArgs),
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// The user the token is for (`sub`). Default: Dev Proxy.
    #[arg(short, long)]
    name: Option<String>,
    /// An audience (`aud`); repeat for more. Default: https://myserver.com.
    #[arg(short, long = "audiences", value_name = "AUDIENCE")]
    audiences: Vec<String>,
    /// The issuer (`iss`). Default: dev-proxy.
    #[arg(short, long)]
    issuer: Option<String>,
    /// A role (`roles`); repeat for more.
    #[arg(short, long = "roles", value_name = "ROLE")]
    roles: Vec<String>,
    /// A scope (`scp`); repeat for more.
    #[arg(short, long = "scopes", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// Another claim, `name:value`; repeat for more. The registered claims and `scp` and
    /// `roles` cannot be set this way.
    #[arg(long = "claims", value_name = "NAME:VALUE", value_parser = parse_claim)]
    claims: Vec<(String, String)>,
    /// How long the token is valid, in minutes. Default: 60.
    #[arg(short, long, value_name = "MINUTES")]
    valid_for: Option<f64>,
    /// The signing key, at least 32 characters. Default: a random one (the token then
    /// verifies against nothing, which is often enough for a test).
    #[arg(short = 'k', long, value_name = "KEY")]
    signing_key: Option<String>,
}

fn parse_claim(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err("expected NAME:VALUE, with a non-empty name".to_owned()),
    }
}

/// Runs `holdoff jwt`: the token on `out`.
pub(crate) fn run(args: Args, out: &mut impl Write) -> Result<(), Failure> {
    let Action::Create(args) = args.action;
    let nonempty = |values: Vec<String>| (!values.is_empty()).then_some(values);
    let options = JwtOptions {
        name: args.name,
        audiences: nonempty(args.audiences),
        issuer: args.issuer,
        roles: nonempty(args.roles),
        scopes: nonempty(args.scopes),
        claims: (!args.claims.is_empty())
            .then(|| args.claims.into_iter().collect::<BTreeMap<_, _>>()),
        valid_for: args.valid_for,
        signing_key: args.signing_key,
    };
    let token = jwt::create(&options, SystemClock.wall_now())
        .map_err(|err| Failure::Usage(err.to_string()))?;
    writeln!(out, "{token}")?;
    Ok(())
}
