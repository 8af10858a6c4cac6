//! The search as JSON (`-j`, `-o json:FILE`), in the report's style: camelCase, rates per
//! second (a search of paced users counts users), latencies in seconds, each SLO judged as the
//! report's `thresholds` are.
//! schema/find-max.schema.json describes it.

use serde_json::{Value, json};

use super::ending::Found;
use super::searched::Searched;
use super::step::{Step, StepOutcome};
use super::text::{Header, conclusion};
use crate::output::verdict_json;
use crate::report::KEPT_RATE;

pub(crate) fn to_json(header: &Header<'_>, steps: &[Step], found: &Found) -> Value {
    let s = header.settings;
    let mut doc = json!({
        "url": header.url,
        "protocol": header.protocol,
        "searched": s.searched.name(),
        "connections": header.connections,
        "workers": header.workers,
        "slos": s.slos.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(),
        "cadence": KEPT_RATE,
        "search": {
            "maxSteps": s.max_steps,
            "stepSeconds": s.step.as_secs_f64(),
            "pauseSeconds": s.pause.as_secs_f64(),
            "precision": s.precision,
        },
        "outcome": found.name(s.searched),
        "conclusion": conclusion(found, s).1,
        "steps": steps.iter().enumerate().map(|(i, step)| step_json(i + 1, step)).collect::<Vec<_>>(),
    });
    // A rate search's numbers are per second; a search of paced users counts users.
    let (start, max, capacity, failed) = match s.searched {
        Searched::Rate => ("startPerSec", "maxRatePerSec", "capacityPerSec", "firstFailedPerSec"),
        Searched::Users => ("startUsers", "maxUsers", "capacityUsers", "firstFailedUsers"),
    };
    doc["search"][start] = json!(s.start);
    doc["search"][max] = json!(s.max);
    doc[capacity] = json!(found.capacity);
    doc[failed] = json!(found.failed);
    doc
}

fn step_json(n: usize, step: &Step) -> Value {
    let verdict = match step.outcome {
        StepOutcome::Held => "pass",
        StepOutcome::Failed => "fail",
        StepOutcome::Interrupted => "interrupted",
        StepOutcome::Incomplete => "incomplete",
    };
    let mut doc = json!({
        "step": n,
        "achievedPerSec": step.achieved,
        "cadence": step.cadence,
        "durationSeconds": step.duration.as_secs_f64(),
        "requests": { "ok": step.ok, "errors": step.errors },
        "errorRate": step.error_rate,
        "status5xxRate": step.status_5xx_rate,
        "latencySeconds": { "p50": step.p50, "p99": step.p99 },
        "blocked": step.blocked,
        "slos": step.slos.iter().map(verdict_json).collect::<Vec<_>>(),
        "verdict": verdict,
        "failed": if step.outcome == StepOutcome::Failed { step.failures() } else { Vec::new() },
        "note": step.note,
    });
    match step.iterations {
        None => doc["requestedPerSec"] = json!(step.level),
        Some(i) => {
            doc["users"] = json!(step.level);
            doc["iterations"] = json!({ "started": i.started, "late": i.late, "missed": i.missed });
        }
    }
    doc
}
