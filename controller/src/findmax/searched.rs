//! What a search varies. In the open model it is the rate: each step sends requests on a
//! schedule, and keeps the cadence when it sent 99% of them. With a paced scenario it is the
//! number of users: each user starts an iteration every pacing period (the closed model), so
//! the load is the users over the pacing, and a step keeps the cadence when its users started
//! 99% of the slots that came due (those a user was still behind on at the end are missed),
//! as a rate search's step keeps it when it sent 99% of its rate; an iteration's latency counts
//! from its slot, so one that started late shows in the latency SLOs. That is the capacity
//! question of a real-time service: how many clients, each sending a frame every 20 ms, does
//! it serve on cadence?

use volley_engine::Plan;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Searched {
    /// Requests per second, in the open model.
    Rate,
    /// A paced scenario's users (connections), in the closed model.
    Users,
}

impl Searched {
    /// Users when the plan's scenarios are paced (all are, or none), else the rate.
    pub(crate) fn of(plan: &Plan) -> Searched {
        let paced = plan.requests.scenarios().is_some_and(|s| s.iter().any(|s| s.pacing.is_some()));
        if paced { Searched::Users } else { Searched::Rate }
    }

    /// `n` of what is searched, for people: `640 requests/s`, `12 users`.
    pub(crate) fn amount(self, n: u64) -> String {
        match self {
            Searched::Rate => format!("{n} requests/s"),
            Searched::Users => format!("{n} {}", if n == 1 { "user" } else { "users" }),
        }
    }

    /// `n` where the unit is already plain: `650/s`, `13 users`.
    pub(crate) fn short(self, n: u64) -> String {
        match self {
            Searched::Rate => format!("{n}/s"),
            Searched::Users => self.amount(n),
        }
    }

    /// The flag that bounds the search from above.
    pub(crate) fn max_flag(self) -> &'static str {
        match self {
            Searched::Rate => "--max-rate",
            Searched::Users => "--max-users",
        }
    }

    /// The JSON's name for it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Searched::Rate => "rate",
            Searched::Users => "users",
        }
    }
}
