//! Links the firmware for its board (bare-metal Arm targets only; on the host the crate
//! builds a stub that says how to build it): the memory map of the board the target stands
//! for — `microbit` for thumbv6m (Cortex-M0), `mps2-an385` / `mps2-an386` (one map) for
//! thumbv7m / thumbv7em — as `memory.x`, which cortex-m-rt's `link.x` includes.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    println!("cargo:rerun-if-changed=build.rs");
    if os != "none" || arch != "arm" {
        return;
    }
    let board = if target.starts_with("thumbv6m") {
        "microbit"
    } else {
        "mps2"
    };
    let source = format!("{dir}/memory-{board}.x");
    println!("cargo:rerun-if-changed={source}");
    std::fs::copy(&source, format!("{out}/memory.x")).expect("copy memory.x");
    // The `rtic` scenario's vector table comes from `src/pac.rs` (cortex-m-rt's `device`
    // feature), whose handlers default to `DefaultHandler` here.
    if std::env::var_os("CARGO_FEATURE_RTIC").is_some() {
        let device: String = ["TIMER0", "DUALTIMER", "I2S", "TOUCHSCREEN"]
            .iter()
            .map(|name| format!("PROVIDE({name} = DefaultHandler);\n"))
            .collect();
        std::fs::write(format!("{out}/device.x"), device).expect("write device.x");
    }
    println!("cargo:rustc-link-search={out}");
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
}
