//! Links the kernel with the linker script of its architecture (only for bare-metal targets:
//! on the host the crate builds a stub that explains how to build it).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rerun-if-changed=build.rs");
    if os != "none" {
        return;
    }
    let script = format!("{dir}/{arch}.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rustc-link-arg-bins=-T{script}");
    // A kernel entered at its physical load address with the MMU (or paging) off cannot
    // relocate itself: link it at a fixed address, not as a position-independent executable.
    println!("cargo:rustc-link-arg-bins=--no-pie");
}
