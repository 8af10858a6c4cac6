//! A small login service for flow tests, served by [`super::TestServer`] (HTTP/1.1, h2c) and
//! [`super::h3_server::H3TestServer`] alike: `POST /login` with `{"user":"U"}` issues user U a
//! token (in the JSON body) and a session cookie (`set-cookie: sid=…`); `GET /profile` answers
//! 200 only to `Authorization: Bearer T` where T was issued to the user its `x-user` names, else
//! 401; `GET /items/T` answers 200 only when T is such a token and the `cookie` holds the sid
//! issued with it. Every k-th login (with [`FlowApp::without_token_every`]) answers without a
//! token or cookie. It counts what it did, by outcome.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// The service: what it issued, and what it answered.
#[derive(Debug, Default)]
pub struct FlowApp {
    no_token_every: Option<u64>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    logins: u64,
    /// Token → (user, sid).
    tokens: HashMap<String, (String, String)>,
    counts: BTreeMap<&'static str, u64>,
}

/// A response of the service.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl FlowApp {
    pub fn new() -> FlowApp {
        FlowApp::default()
    }

    /// Every `k`-th login is answered 200 without a token or cookie.
    pub fn without_token_every(mut self, k: u64) -> FlowApp {
        self.no_token_every = Some(k);
        self
    }

    /// What it did, by outcome: `login`, `login without token`, `login moved`, `profile ok`,
    /// `profile refused`, `go`, `items ok`, `items refused`.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.state.lock().unwrap().counts.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// How many of outcome `what`.
    pub fn count(&self, what: &str) -> u64 {
        self.state.lock().unwrap().counts.get(what).copied().unwrap_or(0)
    }

    /// The answer to a request on one of its routes; None for any other route.
    pub fn answer(&self, method: &str, path: &str, headers: &[(String, String)], body: &[u8]) -> Option<Answer> {
        let header =
            |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map_or("", |(_, v)| v.as_str());
        let mut state = self.state.lock().unwrap();
        let json = |status, text: String| Answer { status, headers: Vec::new(), body: text.into_bytes() };
        let (outcome, answer) = match (method, path) {
            ("POST", "/login") => {
                state.logins += 1;
                let n = state.logins;
                let user = serde_json::from_slice::<serde_json::Value>(body)
                    .ok()
                    .and_then(|v| v["user"].as_str().map(str::to_string))
                    .unwrap_or_default();
                if self.no_token_every.is_some_and(|k| n.is_multiple_of(k)) {
                    ("login without token", json(200, r#"{"error":"busy"}"#.into()))
                } else {
                    let (token, sid) = (format!("t{n}u{user}"), format!("s{n}"));
                    state.tokens.insert(token.clone(), (user.clone(), sid.clone()));
                    let mut answer = json(200, format!(r#"{{"token":"{token}","user":"{user}"}}"#));
                    answer.headers.push(("set-cookie".into(), format!("sid={sid}; Path=/; HttpOnly")));
                    ("login", answer)
                }
            }
            // The old login address: a 307, so the same POST and body go to the new one.
            ("POST", "/old/login") => {
                let moved = Answer { status: 307, headers: vec![("location".into(), "../login".into())], body: vec![] };
                ("login moved", moved)
            }
            // A way to the items that redirects once, by a relative reference, to the same
            // place for the same user: the hop must carry the token in its path and the cookie.
            ("GET", go) if go.starts_with("/go/") => {
                let to = format!("../items/{}", &go["/go/".len()..]);
                ("go", Answer { status: 302, headers: vec![("location".into(), to)], body: b"moved".to_vec() })
            }
            ("GET", "/profile") => {
                let token = header("authorization").strip_prefix("Bearer ").unwrap_or("");
                let user = header("x-user");
                match state.tokens.get(token) {
                    Some((owner, _)) if owner == user => ("profile ok", json(200, format!(r#"{{"user":"{user}"}}"#))),
                    _ => ("profile refused", json(401, r#"{"error":"unauthorized"}"#.into())),
                }
            }
            ("GET", items) if items.starts_with("/items/") => {
                let token = &items["/items/".len()..];
                let cookie = header("cookie");
                let user = header("x-user");
                match state.tokens.get(token) {
                    Some((owner, sid)) if owner == user && cookie == format!("sid={sid}") => {
                        ("items ok", json(200, r#"{"items":[1,2,3]}"#.into()))
                    }
                    _ => ("items refused", json(401, r#"{"error":"unauthorized"}"#.into())),
                }
            }
            _ => return None,
        };
        *state.counts.entry(outcome).or_default() += 1;
        Some(answer)
    }
}
