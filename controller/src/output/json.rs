//! The JSON report with the thresholds' verdicts: what `-j`, `-o json` and `-o jsonl` write.
//! schema/report.schema.json describes it.

use serde_json::{Value, json};

use crate::gate::Verdict;
use crate::report::{Report, to_json};

pub(crate) fn report_json(report: &Report, verdicts: &[Verdict]) -> Value {
    let mut value = to_json(report);
    if let Some(object) = value.as_object_mut() {
        object.insert("thresholds".into(), Value::Array(verdicts.iter().map(verdict).collect()));
        object.insert(
            "thresholdsPassed".into(),
            json!((!verdicts.is_empty()).then(|| verdicts.iter().all(|v| v.passed))),
        );
        let aborted = report.aborted.as_ref().map(
            |b| json!({ "threshold": b.threshold, "afterSeconds": b.after.as_secs_f64(), "measured": b.measured }),
        );
        object.insert("abortedBy".into(), json!(aborted));
    }
    value
}

/// One judged threshold (or `find-max` SLO) as the report's `thresholds` list it.
pub(crate) fn verdict(v: &Verdict) -> Value {
    let mut value = json!({
        "threshold": v.threshold.text,
        "metric": v.threshold.name,
        "op": v.threshold.op.to_string(),
        "limit": v.threshold.limit,
        "measured": v.measured,
        "unit": v.unit(),
        "passed": v.passed,
    });
    if let Some(object) = value.as_object_mut() {
        if let Some(name) = &v.threshold.mix_name {
            object.insert("name".into(), json!(name));
        }
        if let Some(after) = v.aborted_after {
            object.insert("abortedAfterSeconds".into(), json!(after.as_secs_f64()));
        }
        if let Some(old) = v.threshold.baseline {
            object.insert("baseline".into(), json!(old));
            object.insert("delta".into(), json!(v.delta()));
        }
    }
    value
}
