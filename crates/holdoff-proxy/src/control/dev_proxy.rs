//! Dev Proxy's API paths on the control API, for scripts written against Dev Proxy's
//! `--api-port`: `GET`/`POST /proxy` (recording on and off), `POST /proxy/stopProxy`,
//! `GET /proxy/rootCertificate?format=crt`, `POST /proxy/jwtToken`, and
//! `POST /proxy/mockRequest` (the request a [`super::MockRequestSender`] sends). JSON keys are read in any case, as ASP.NET reads them, and
//! written in camelCase, as Dev Proxy writes them; refusals are RFC 9457 problem details,
//! as Dev Proxy's.

use bytes::Bytes;
use http::header::CONTENT_DISPOSITION;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use serde_json::{Map, Value, json};

use super::Control;
use super::answer::{Answer, json_with, with_type};
use crate::jwt::{self, JwtOptions};

/// The most a request body may hold.
const MAX_BODY: usize = 64 * 1024;

/// Whether `path` is one of Dev Proxy's.
pub(super) fn is_dev_proxy_path(path: &str) -> bool {
    path == "/proxy" || path.starts_with("/proxy/")
}

/// The answer to a request for one of Dev Proxy's paths (the Host and Origin checks done).
pub(super) async fn answer<B>(control: &Control, request: http::Request<B>) -> Answer
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    let allowed = match path.as_str() {
        "/proxy" => "GET, HEAD, POST",
        "/proxy/rootCertificate" => "GET, HEAD",
        "/proxy/stopProxy" | "/proxy/jwtToken" | "/proxy/mockRequest" => "POST",
        _ => {
            return problem(
                StatusCode::NOT_FOUND,
                "Not Found",
                &format!("no such endpoint: {path} (GET / lists them)"),
            );
        }
    };
    let is_get = method == Method::GET || method == Method::HEAD;
    if !(is_get && allowed.contains("GET") || method == Method::POST && allowed.contains("POST")) {
        let mut answer = problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method Not Allowed",
            &format!("{path} answers {allowed} only, not {method}"),
        );
        answer
            .headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static(allowed));
        return answer;
    }
    let body = if method == Method::POST {
        match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => {
                return problem(
                    StatusCode::BAD_REQUEST,
                    "Invalid Request",
                    &format!("cannot read the body (at most {MAX_BODY} bytes): {err}"),
                );
            }
        }
    } else {
        Bytes::new()
    };
    match (path.as_str(), is_get) {
        ("/proxy", true) => json_with(StatusCode::OK, &info(control)),
        ("/proxy", false) => set(control, &body),
        ("/proxy/rootCertificate", _) => root_certificate(control, &query),
        ("/proxy/stopProxy", _) => stop(control),
        ("/proxy/jwtToken", _) => jwt_token(&body),
        _ => mock_request(control).await,
    }
}

/// `POST /proxy/mockRequest`: sends the configured request, and says how it went (`202`, as
/// Dev Proxy answers, whatever its target said).
async fn mock_request(control: &Control) -> Answer {
    let Some(sender) = &control.mock_request else {
        return problem(
            StatusCode::NOT_FOUND,
            "Not Found",
            "no mock request is configured: set `mockRequest` in a holdoff config, or enable \
             Dev Proxy's MockRequestPlugin with its mock-request.json",
        );
    };
    let answer = match sender.send().await {
        Ok(status) => {
            tracing::info!("sent the mock request; its target answered {status}");
            json!({ "sent": true, "status": status })
        }
        Err(error) => {
            tracing::warn!("the mock request could not be sent: {error}");
            json!({ "sent": false, "error": error })
        }
    };
    json_with(StatusCode::ACCEPTED, &answer)
}

/// Dev Proxy's `ProxyInfo`: whether it records, and its config file.
fn info(control: &Control) -> Value {
    json!({
        "recording": control.recording.as_ref().map(|switch| switch.is_on()),
        "configFile": control.config_file.as_deref(),
    })
}

/// `POST /proxy`: `{"recording": true|false}` flips recording; `configFile` cannot be set.
fn set(control: &Control, body: &[u8]) -> Answer {
    let fields = match object(body) {
        Ok(fields) => fields,
        Err(answer) => return *answer,
    };
    if fields.contains_key("configfile") {
        return problem(
            StatusCode::BAD_REQUEST,
            "One or more validation errors occurred.",
            "configFile cannot be set",
        );
    }
    match fields.get("recording") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(on)) => match &control.recording {
            Some(switch) => switch.set(*on),
            None => {
                return problem(
                    StatusCode::NOT_FOUND,
                    "Not Found",
                    "recording cannot be switched: this proxy records no events",
                );
            }
        },
        Some(other) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "One or more validation errors occurred.",
                &format!("recording must be true or false, not {other}"),
            );
        }
    }
    json_with(StatusCode::OK, &info(control))
}

/// `GET /proxy/rootCertificate?format=crt`: the CA certificate, in PEM.
fn root_certificate(control: &Control, query: &str) -> Answer {
    let format = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| key.eq_ignore_ascii_case("format"))
        .map(|(_, value)| value);
    match format {
        Some(format) if format.eq_ignore_ascii_case("crt") => {}
        Some(_) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "One or more validation errors occurred.",
                "Invalid format. Supported format is 'crt'.",
            );
        }
        None => {
            return problem(
                StatusCode::BAD_REQUEST,
                "One or more validation errors occurred.",
                "Format is required: ?format=crt",
            );
        }
    }
    let Some(pem) = &control.ca_pem else {
        return problem(
            StatusCode::NOT_FOUND,
            "Certificate Not Found",
            "No root certificate: this proxy intercepts nothing (reverse mode, or no URLs \
             watched).",
        );
    };
    let mut answer = with_type(
        StatusCode::OK,
        "application/x-x509-ca-cert",
        pem.to_string(),
    );
    answer.headers_mut().insert(
        CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=holdoff-ca.pem"),
    );
    answer
}

/// `POST /proxy/stopProxy`: `202`, then the proxy stops as on Ctrl-C (its reports written).
fn stop(control: &Control) -> Answer {
    let Some(stop) = &control.stop else {
        return problem(
            StatusCode::NOT_FOUND,
            "Not Found",
            "this proxy cannot be stopped through its API",
        );
    };
    tracing::info!("stopping: asked to through the API (POST /proxy/stopProxy)");
    stop.cancel();
    with_type(StatusCode::ACCEPTED, "text/plain; charset=utf-8", "")
}

/// `POST /proxy/jwtToken`: `{"token": "…"}` for Dev Proxy's JWT options.
fn jwt_token(body: &[u8]) -> Answer {
    let fields = match object(body) {
        Ok(fields) => fields,
        Err(answer) => return *answer,
    };
    // ASP.NET reads keys in any case: camelCase them for serde.
    let fields: Map<String, Value> = fields
        .into_iter()
        .map(|(key, value)| {
            let key = match key.as_str() {
                "validfor" => "validFor".to_owned(),
                "signingkey" => "signingKey".to_owned(),
                _ => key,
            };
            (key, value)
        })
        .collect();
    let options: JwtOptions = match serde_json::from_value(Value::Object(fields)) {
        Ok(options) => options,
        Err(err) => {
            return problem(StatusCode::BAD_REQUEST, "Invalid Request", &err.to_string());
        }
    };
    match jwt::create(&options, holdoff::clock::SystemClock.wall_now()) {
        Ok(token) => json_with(StatusCode::OK, &json!({ "token": token })),
        Err(jwt::JwtError::KeyTooShort) => problem(
            StatusCode::BAD_REQUEST,
            "Key too short",
            &jwt::JwtError::KeyTooShort.to_string(),
        ),
        Err(err) => problem(StatusCode::BAD_REQUEST, "Invalid Request", &err.to_string()),
    }
}

/// The body as a JSON object, its keys lowercased (an empty body is an empty object).
fn object(body: &[u8]) -> Result<Map<String, Value>, Box<Answer>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) => Ok(fields
            .into_iter()
            .map(|(key, value)| (key.to_ascii_lowercase(), value))
            .collect()),
        Ok(other) => Err(Box::new(problem(
            StatusCode::BAD_REQUEST,
            "Invalid Request",
            &format!("the body must be a JSON object, not {other}"),
        ))),
        Err(err) => Err(Box::new(problem(
            StatusCode::BAD_REQUEST,
            "Invalid Request",
            &format!("the body is not JSON: {err}"),
        ))),
    }
}

/// An RFC 9457 problem, as Dev Proxy's API answers a refusal.
fn problem(status: StatusCode, title: &str, detail: &str) -> Answer {
    let mut answer = json_with(
        status,
        &json!({ "title": title, "detail": detail, "status": status.as_u16() }),
    );
    answer.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    answer
}
