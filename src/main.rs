//! The `volley` binary: everything lives in the workspace crates; this file only picks the
//! allocator and hands over to the controller's command line.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // mimalloc asks for transparent huge pages on its arenas, which turns every touched byte
    // of heap into a resident 2 MiB page: 16 MB of RSS for a few hundred KB in use. A load
    // generator gains nothing from huge pages, and its footprint is part of what it reports.
    // SAFETY: prctl with plain integer arguments.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    volley_controller::main()
}
