//! The search as text: what was asked, the table of steps, and the capacity found.

use super::ending::{Ending, Found};
use super::search::Conclusion;
use super::searched::Searched;
use super::settings::Settings;
use super::step::{Step, StepOutcome};
use crate::report::KEPT_RATE;

/// What the search was: target, shape of each step, SLOs and how the search moves.
pub(crate) struct Header<'a> {
    pub url: &'a str,
    pub protocol: &'a str,
    pub connections: usize,
    pub workers: usize,
    pub settings: &'a Settings,
}

pub(crate) fn to_text(header: &Header<'_>, steps: &[Step], found: &Found) -> String {
    let s = header.settings;
    let mut out = String::new();
    let workers = match header.workers {
        1 => String::new(),
        n => format!(" over {n} workers"),
    };
    let (shape, cadence, head) = match s.searched {
        Searched::Rate => (
            format!("{} connections", header.connections),
            format!("requests sent at {:.0}% of the rate or more", KEPT_RATE * 100.0),
            " step     rate/s  achieved/s     p50 ms     p99 ms    errors       5xx  verdict\n",
        ),
        Searched::Users => (
            "paced users".to_string(),
            format!("{:.0}% of the slots due or more started, latency counted from the slot", KEPT_RATE * 100.0),
            " step      users  iterations/s       kept     p50 ms     p99 ms    errors       5xx  verdict\n",
        ),
    };
    out.push_str(&format!("Capacity search: {} ({}, {shape}{workers})\n", header.url, header.protocol));
    let slos: Vec<&str> = s.slos.iter().map(|t| t.text.as_str()).collect();
    out.push_str(&format!("SLOs:         {}, and the cadence ({cadence})\n", slos.join(", ")));
    let (step, precision) = (s.step.as_secs_f64(), percent(s.precision));
    out.push_str(&format!(
        "Search:       steps of {step}s, doubling from {} up to {}, then bisecting to within {precision}% (at most {} steps)\n\n",
        s.searched.short(s.start),
        s.searched.short(s.max),
        s.max_steps
    ));
    out.push_str(head);
    for (i, step) in steps.iter().enumerate() {
        out.push_str(&row(i + 1, step));
    }
    out.push('\n');
    let (label, sentence) = conclusion(found, s);
    let label = format!("{label}:");
    out.push_str(&format!("{label:<14}{sentence}\n"));
    out
}

fn row(n: usize, step: &Step) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.3}", v * 1e3));
    let share = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.3}%", v * 100.0));
    let verdict = match step.outcome {
        StepOutcome::Held => "pass".to_string(),
        StepOutcome::Failed => format!("FAIL  {}", step.failures().join("; ")),
        StepOutcome::Interrupted => "interrupted (not judged)".to_string(),
        StepOutcome::Incomplete => {
            format!("incomplete (not judged): {}", step.note.as_deref().unwrap_or("a worker failed"))
        }
    };
    let (p50, p99, errors, fives) = (ms(step.p50), ms(step.p99), share(step.error_rate), share(step.status_5xx_rate));
    match step.searched {
        Searched::Rate => format!(
            "{n:>5} {:>10} {:>11.1} {p50:>10} {p99:>10} {errors:>9} {fives:>9}  {verdict}\n",
            step.level, step.achieved
        ),
        Searched::Users => format!(
            "{n:>5} {:>10} {:>13.1} {:>10} {p50:>10} {p99:>10} {errors:>9} {fives:>9}  {verdict}\n",
            step.level,
            step.achieved,
            share(Some(step.cadence))
        ),
    }
}

/// The closing line, as its label and its sentence: the capacity, or why there is none.
pub(crate) fn conclusion(found: &Found, s: &Settings) -> (&'static str, String) {
    let precision = percent(s.precision);
    let (amount, short) = (|n: u64| s.searched.amount(n), |n: u64| s.searched.short(n));
    let so_far = match found.capacity {
        Some(c) => format!("the highest {} that held so far is {}", s.searched.name(), amount(c)),
        None => "no step had held".to_string(),
    };
    let (steps, max_flag) = (s.max_steps, s.searched.max_flag());
    let lower = match s.searched {
        Searched::Rate => "a lower --start",
        Searched::Users => "a lower --start, or a longer pacing",
    };
    match &found.ending {
        Ending::Concluded(Conclusion::Found { capacity, failed }) => {
            let above = (*failed as f64 / *capacity as f64 - 1.0) * 100.0;
            let sentence = format!(
                "{} held every SLO and the cadence; {} did not ({above:.1}% above, within the {precision}% asked)",
                amount(*capacity),
                short(*failed)
            );
            ("Capacity", sentence)
        }
        Ending::Concluded(Conclusion::ReachedMax { capacity }) => (
            "Capacity",
            format!("at least {}: every step held, up to {max_flag}; raise it to search further", amount(*capacity)),
        ),
        Ending::Concluded(Conclusion::StepLimit { capacity, failed: Some(failed) }) => (
            "Capacity",
            format!(
                "{} held every SLO and the cadence; {} did not; --max-steps ({steps}) ended the search before the two were within {precision}%",
                amount(*capacity),
                short(*failed)
            ),
        ),
        Ending::Concluded(Conclusion::StepLimit { capacity, failed: None }) => (
            "Capacity",
            format!("at least {}: every step held until --max-steps ({steps}) ended the search", amount(*capacity)),
        ),
        Ending::Concluded(Conclusion::FirstStepFailed { failed }) => {
            ("No capacity", format!("even the first step, {}, failed; try {lower}", amount(*failed)))
        }
        Ending::Interrupted => ("Interrupted", format!("Ctrl-C stopped the search; {so_far}")),
        Ending::Incomplete(why) => ("Stopped", format!("a worker failed during a step ({why}); {so_far}")),
        Ending::CouldNotRun(why) => ("Stopped", format!("a step could not run ({why}); {so_far}")),
    }
}

/// A fraction as a percent for people: 0.05 is 5, 0.001 is 0.1 (to two decimals).
fn percent(fraction: f64) -> f64 {
    (fraction * 1e4).round() / 1e2
}
