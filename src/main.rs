//! The `volley` binary: everything lives in the workspace crates; this file only picks the
//! allocator and hands over to the controller's command line.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    volley_controller::main()
}
