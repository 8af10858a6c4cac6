//! Think time: the pause a virtual user takes after a step's answer before its next request,
//! as a person reading a page would. It is not part of any latency: the next request is due when
//! the pause ends.

use std::time::Duration;

use crate::random::next_random;

/// How long a user pauses after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Think {
    /// Always this long.
    Fixed(Duration),
    /// Uniformly between the two, inclusive.
    Uniform(Duration, Duration),
    /// Exponentially distributed with this mean (a Poisson process's gaps), capped at 20 means
    /// so that one draw cannot stall a user for the rest of a run.
    Exponential(Duration),
}

impl Think {
    /// One pause, drawn from `rng` (xorshift64* state, never 0).
    pub(crate) fn draw(&self, rng: &mut u64) -> Duration {
        match *self {
            Think::Fixed(d) => d,
            Think::Uniform(low, high) => {
                let span = high.saturating_sub(low).as_nanos() as u64;
                low + Duration::from_nanos(if span == 0 { 0 } else { next_random(rng) % (span + 1) })
            }
            Think::Exponential(mean) => {
                // 53 random bits as a uniform in (0, 1]: its -ln is an exponential of mean 1.
                let u = ((next_random(rng) >> 11) + 1) as f64 / (1u64 << 53) as f64;
                mean.mul_f64((-u.ln()).min(20.0))
            }
        }
    }

    /// The longest pause it can draw.
    pub fn longest(&self) -> Duration {
        match *self {
            Think::Fixed(d) => d,
            Think::Uniform(_, high) => high,
            Think::Exponential(mean) => mean.saturating_mul(20),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_are_drawn_within_their_bounds_and_around_their_mean() {
        let mut rng = 0x1234_5678;
        let ms = Duration::from_millis;
        assert_eq!(Think::Fixed(ms(20)).draw(&mut rng), ms(20));
        let uniform: Vec<Duration> = (0..10_000).map(|_| Think::Uniform(ms(10), ms(30)).draw(&mut rng)).collect();
        assert!(uniform.iter().all(|d| (ms(10)..=ms(30)).contains(d)));
        let mean = uniform.iter().sum::<Duration>() / 10_000;
        assert!((ms(19)..=ms(21)).contains(&mean), "{mean:?}");
        let exponential: Vec<Duration> = (0..20_000).map(|_| Think::Exponential(ms(10)).draw(&mut rng)).collect();
        assert!(exponential.iter().all(|d| *d <= ms(200)));
        let mean = exponential.iter().sum::<Duration>() / 20_000;
        // The standard error of 20,000 draws' mean is 10 ms / √20000, about 0.07 ms.
        assert!((ms(9) + Duration::from_micros(600)..=ms(10) + Duration::from_micros(400)).contains(&mean), "{mean:?}");
        assert_eq!(Think::Uniform(ms(5), ms(5)).draw(&mut rng), ms(5));
    }
}
