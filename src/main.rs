//! The `volley` binary: everything lives in the workspace crates; this file only picks the
//! allocator and hands over to the controller's command line.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs from the ELF's `.init_array`, before the Rust runtime's first allocation: mimalloc asks
/// for transparent huge pages on its arenas, which turns every touched byte of heap into a
/// resident 2 MiB page (a few hundred KB in use showed as several MB of RSS). A load generator
/// gains nothing from huge pages, and its footprint is part of what it reports. Called in
/// `main`, this came after the runtime's first allocations had already faulted in two huge
/// pages.
#[used]
#[unsafe(link_section = ".init_array")]
static DISABLE_THP: extern "C" fn() = disable_thp;

extern "C" fn disable_thp() {
    // SAFETY: prctl with plain integer arguments; a kernel without it returns an error, ignored.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

fn main() -> std::process::ExitCode {
    volley_controller::main()
}
