//! bench/flow.sh's Goose peer: the login flow of bench/flow.sh as one Goose transaction,
//! looped by each user with no wait between iterations.
//!
//! Goose's own options come from the command line (--host, --users, --increase-rate,
//! --run-time); the CSV of users from FLOW_USERS (columns user,password, with a header),
//! walked in turn by all users together, as Locust's itertools.cycle does. At the end it
//! prints one JSON line: per request name, the requests that passed and failed, and the
//! seconds from the first test-plan step to the last (what flow.sh's parser reads).

use goose::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

static USERS: OnceLock<Vec<(String, String)>> = OnceLock::new();
static NEXT: AtomicUsize = AtomicUsize::new(0);

fn next_user() -> &'static (String, String) {
    let rows = USERS.get().expect("users loaded before the attack");
    &rows[NEXT.fetch_add(1, Ordering::Relaxed) % rows.len()]
}

fn load_users(path: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("FLOW_USERS {path}: {e}"));
    let rows: Vec<(String, String)> = text
        .lines()
        .skip(1) // the header
        .filter_map(|l| l.split_once(','))
        .map(|(u, p)| (u.to_string(), p.to_string()))
        .collect();
    assert!(!rows.is_empty(), "FLOW_USERS {path}: no rows");
    rows
}

/// POST /login (a CSV row as JSON; the token taken from the JSON answer, the session cookie
/// kept by the user's own reqwest client), GET /profile with the token (status 200, body
/// contains "hello"), GET /items with the cookie (status 200). A failed request or check is
/// marked failed in Goose's metrics (and the transaction with it); a login without a token
/// ends the iteration, a failed check does not.
async fn flow(user: &mut GooseUser) -> TransactionResult {
    let (name, password) = next_user();
    let body = serde_json::json!({ "user": name, "password": password });
    let builder = user.get_request_builder(&GooseMethod::Post, "/login")?.json(&body);
    let request = GooseRequest::builder()
        .method(GooseMethod::Post)
        .path("/login")
        .name("login")
        .set_request_builder(builder)
        .build();
    let mut login = user.request(request).await?;
    let token = match login.response {
        Ok(r) => r.json::<serde_json::Value>().await.ok().and_then(|v| v.get("token")?.as_str().map(str::to_string)),
        Err(_) => None,
    };
    let Some(token) = token else {
        return user.set_failure("no token", &mut login.request, None, None);
    };

    let builder = user.get_request_builder(&GooseMethod::Get, "/profile")?.bearer_auth(&token);
    let request = GooseRequest::builder().path("/profile").name("profile").set_request_builder(builder).build();
    let mut profile = user.request(request).await?;
    let ok = match profile.response {
        Ok(r) if r.status() == 200 => r.text().await.is_ok_and(|t| t.contains("hello")),
        _ => false,
    };
    // set_failure returns the transaction's error: kept for the end, the flow goes on.
    let mut result = Ok(());
    if !ok {
        result = user.set_failure("check", &mut profile.request, None, None);
    }

    let mut items = user.get_named("/items", "items").await?;
    let ok = match items.response {
        // Read to the end, so that the connection is kept for the next request.
        Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
        _ => false,
    };
    if !ok {
        let failed = user.set_failure("check", &mut items.request, None, None);
        result = result.and(failed);
    }
    result
}

// One worker thread, as every client of flow.sh has (and pinned to one CPU by it).
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), GooseError> {
    let path = std::env::var("FLOW_USERS").expect("FLOW_USERS: the CSV of users");
    USERS.set(load_users(&path)).expect("set once");
    let metrics = GooseAttack::initialize()?
        .register_scenario(scenario!("visit").register_transaction(transaction!(flow)))
        // The counts cover the whole run (Goose resets them once all users have started).
        .set_default(GooseDefault::NoResetMetrics, true)?
        // No controller listening on a port, no tables: the summary below is what is read.
        .set_default(GooseDefault::NoTelnet, true)?
        .set_default(GooseDefault::NoPrintMetrics, true)?
        .execute()
        .await?;

    let mut names = serde_json::Map::new();
    for (key, r) in &metrics.requests {
        let name = key.split_once(' ').map_or(key.as_str(), |(_, n)| n);
        names.insert(name.to_string(), serde_json::json!({ "ok": r.success_count, "failed": r.fail_count }));
    }
    let times: Vec<_> = metrics.history.iter().map(|h| h.timestamp).collect();
    let seconds = match (times.iter().min(), times.iter().max()) {
        (Some(a), Some(b)) => (*b - *a).num_microseconds().unwrap_or(0) as f64 / 1e6,
        _ => 0.0,
    };
    println!("{}", serde_json::json!({ "goose": env!("CARGO_PKG_NAME"), "requests": names, "seconds": seconds }));
    Ok(())
}
