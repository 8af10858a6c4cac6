//! The engine's one pseudo-random generator (xorshift64*): fast, and plenty for picking
//! requests, rows and template values. Seeded, so that the same plan draws the same numbers.

/// A xorshift64* state from `z`: splitmix64's finaliser spreads nearby inputs apart, and the
/// state is never 0, which xorshift cannot leave.
pub(crate) fn generator_state(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

/// xorshift64*'s next number.
#[inline]
pub(crate) fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}
