//! The search as JSON (`-j`, `-o json:FILE`), in the report's style: camelCase, rates per
//! second, latencies in seconds, each SLO judged as the report's `thresholds` are.
//! schema/find-max.schema.json describes it.

use serde_json::{Value, json};

use super::ending::Found;
use super::step::{Step, StepOutcome};
use super::text::{Header, conclusion};
use crate::output::verdict_json;
use crate::report::KEPT_RATE;

pub(crate) fn to_json(header: &Header<'_>, steps: &[Step], found: &Found) -> Value {
    let s = header.settings;
    json!({
        "url": header.url,
        "protocol": header.protocol,
        "connections": header.connections,
        "workers": header.workers,
        "slos": s.slos.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(),
        "cadence": KEPT_RATE,
        "search": {
            "startPerSec": s.start,
            "maxRatePerSec": s.max_rate,
            "maxSteps": s.max_steps,
            "stepSeconds": s.step.as_secs_f64(),
            "pauseSeconds": s.pause.as_secs_f64(),
            "precision": s.precision,
        },
        "outcome": found.name(),
        "capacityPerSec": found.capacity,
        "firstFailedPerSec": found.failed,
        "conclusion": conclusion(found, s).1,
        "steps": steps.iter().enumerate().map(|(i, step)| step_json(i + 1, step)).collect::<Vec<_>>(),
    })
}

fn step_json(n: usize, step: &Step) -> Value {
    let verdict = match step.outcome {
        StepOutcome::Held => "pass",
        StepOutcome::Failed => "fail",
        StepOutcome::Interrupted => "interrupted",
        StepOutcome::Incomplete => "incomplete",
    };
    json!({
        "step": n,
        "requestedPerSec": step.rate,
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
    })
}
