//! The congestion "controller" for loopback-class paths: a window that never moves.
//!
//! quinn-proto paces every window up to `u32::MAX` bytes (its pacer spreads a window over
//! the RTT) and shrinks the window on every loss. On loopback or a LAN the client is not what
//! congests the path, and a load generator that throttles itself measures itself: so the
//! window is fixed above the pacer's limit, which is quinn-proto's own way to turn pacing off.
//! Loss is still detected and repaired; only the sending rate ignores it. A real WAN takes
//! [`super::Congestion::Standard`] instead.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn_proto::RttEstimator;
use quinn_proto::congestion::{Controller, ControllerFactory};

/// Above `u32::MAX`, where quinn-proto stops pacing (see `connection/pacing.rs` there).
pub(crate) const FIXED_WINDOW: u64 = 1 << 33;

#[derive(Debug, Clone, Copy)]
pub(crate) struct FixedWindow;

impl ControllerFactory for FixedWindow {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(FixedWindow)
    }
}

impl Controller for FixedWindow {
    fn on_ack(&mut self, _now: Instant, _sent: Instant, _bytes: u64, _app_limited: bool, _rtt: &RttEstimator) {}

    fn on_congestion_event(&mut self, _now: Instant, _sent: Instant, _persistent: bool, _lost_bytes: u64) {}

    fn on_mtu_update(&mut self, _new_mtu: u16) {}

    fn window(&self) -> u64 {
        FIXED_WINDOW
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(FixedWindow)
    }

    fn initial_window(&self) -> u64 {
        FIXED_WINDOW
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
