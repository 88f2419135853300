//! The driver features, named once: `cfg(any_driver)` when the build has at least one driver
//! (`blocking`, `tokio`, `smol`, `async-std`) and `cfg(async_driver)` when it has one on an async
//! runtime (`tokio`, `smol`, `async-std`). The library, its tests and its doc tests write
//! `#[cfg(any_driver)]` rather than the list.

/// The async runtimes' features, as Cargo names them to a build script.
const ASYNC_DRIVERS: [&str; 3] = ["TOKIO", "SMOL", "ASYNC_STD"];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(any_driver)");
    println!("cargo::rustc-check-cfg=cfg(async_driver)");
    let on = |feature: &str| std::env::var_os(format!("CARGO_FEATURE_{feature}")).is_some();
    let async_driver = ASYNC_DRIVERS.into_iter().any(on);
    if async_driver {
        println!("cargo::rustc-cfg=async_driver");
    }
    if async_driver || on("BLOCKING") {
        println!("cargo::rustc-cfg=any_driver");
    }
}
