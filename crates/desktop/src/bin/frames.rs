//! Frame cost, headless: the CPU time the window spends per frame — `update`, `view`, layout,
//! draw and tiny-skia rasterisation at 1400×860 — while a turn streams (one `session/update`
//! a frame) and while a 10,000-line diff is scrolled. Each is measured twice:
//!
//! - `window`: as the window does it — tiny-skia's compositor compares the frame's layers with
//!   the last frame's and rasterises only the damaged rectangles into the kept buffer
//!   (`iced_tiny_skia::window::compositor::present`; on X11 softbuffer reports the buffer's age,
//!   so this path is taken from the second frame on);
//! - `full`: the whole window rasterised every frame (`Renderer::screenshot`, what a first frame
//!   or a resize costs).
//!
//! Both leave out sending the pixels to the X server (softbuffer's `PutImage`).
//!
//! `cargo run --release -p trellis-desktop --features bench --bin frames [window|full] [streaming|scrolling]`
//! (everything by default).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

// It drives tiny-skia's renderer directly: with the `wgpu` feature iced's renderer is another
// type, and there is nothing to run.
#[cfg(not(feature = "wgpu"))]
#[path = "frames/bench.rs"]
mod bench;

#[cfg(not(feature = "wgpu"))]
fn main() {
    bench::main();
}

#[cfg(feature = "wgpu")]
fn main() {
    println!("the frame benchmark measures the tiny-skia renderer: build it without `wgpu`");
}
