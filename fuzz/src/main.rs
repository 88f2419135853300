//! The fuzz harness of kafka-coordination, on the stable toolchain (no cargo-fuzz, no
//! sanitizers): a deterministic seeded generator feeds random inputs and mutations of valid
//! encodings to every record decoder, to `RoleState`, and to every parser of broker bytes in
//! the Kafka transport (frames, response headers and bodies, record batches, SCRAM messages).
//!
//! For every input it catches a panic, checks the target's properties, and measures the
//! allocations of the run with a counting global allocator. An input fails when it panics,
//! breaks a property, or allocates past the bound: no single allocation and no peak of live
//! bytes above [`BOUND_BASE`] + [`BOUND_PER_BYTE`] x the input's size. A failure is printed
//! with its target, seed and input (hex), and can be replayed from the seed.
//!
//! ```text
//! fuzz [--inputs N] [--seed S] [--target NAME]... [--max-failures K]
//! fuzz --replay TARGET:SEED
//! fuzz --list
//! ```
//! `scripts/fuzz.sh` builds it (profile `fuzz`: optimised, with overflow checks and debug
//! assertions) and runs it.

mod alloc;
mod mutate;
mod rng;
mod targets;

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

use rng::{mix, Rng};
use targets::{Input, Outcome, Seeds, Target};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

/// The allocation bound, part one: a fixed allowance (the connection's read buffer starts at
/// 64 KiB; the rest are small constant structures).
const BOUND_BASE: usize = 256 * 1024;
/// The allocation bound, part two: bytes per byte of input.
const BOUND_PER_BYTE: usize = 32;

fn bound(input_len: usize) -> usize {
    BOUND_BASE + BOUND_PER_BYTE * input_len
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Whether a target runs now: its panics are caught and reported with the input; any
    /// other panic is the harness's own and is printed.
    static IN_RUN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

struct Options {
    inputs: u64,
    seed: u64,
    targets: Vec<String>,
    replay: Option<(String, u64)>,
    max_failures: usize,
    list: bool,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.replace('_', "").parse(),
    };
    parsed.map_err(|e| format!("'{s}' is not a number: {e}"))
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        inputs: 200_000,
        seed: 0x6b61_666b_6121,
        targets: Vec::new(),
        replay: None,
        max_failures: 10,
        list: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--inputs" => o.inputs = parse_u64(&value()?)?,
            "--seed" => o.seed = parse_u64(&value()?)?,
            "--target" => o.targets.push(value()?),
            "--max-failures" => o.max_failures = parse_u64(&value()?)? as usize,
            "--replay" => {
                let v = value()?;
                let (t, s) = v
                    .split_once(':')
                    .ok_or_else(|| format!("--replay takes TARGET:SEED, not '{v}'"))?;
                o.replay = Some((t.to_owned(), parse_u64(s)?));
            }
            "--list" => o.list = true,
            "-h" | "--help" => {
                return Err("usage: fuzz [--inputs N] [--seed S] [--target NAME]... \
                            [--max-failures K] | --replay TARGET:SEED | --list"
                    .into())
            }
            other => return Err(format!("unknown argument '{other}' (see --help)")),
        }
    }
    Ok(o)
}

/// The seed of input `index` of `target` in a run seeded with `seed`.
fn input_seed(seed: u64, target: &str, index: u64) -> u64 {
    let name = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    mix(mix(seed, name), index)
}

/// What one input did.
struct Run {
    outcome: Result<Outcome, String>,
    usage: alloc::Usage,
}

fn run_one(t: &Target, seeds: &Seeds, input: &Input) -> Run {
    IN_RUN.with(|r| r.set(true));
    let base = alloc::reset();
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| (t.run)(input, seeds)));
    let usage = alloc::usage(base);
    IN_RUN.with(|r| r.set(false));
    let outcome = outcome.map_err(|_| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "a panic without a message".into())
    });
    Run { outcome, usage }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn describe(input: &Input) -> String {
    let mut s = format!(
        "  params: {:?}\n  input ({} bytes): {}",
        input.params,
        input.bytes.len(),
        hex(&input.bytes)
    );
    if !input.extra.is_empty() {
        s.push_str(&format!(
            "\n  second input ({} bytes): {}",
            input.extra.len(),
            hex(&input.extra)
        ));
    }
    s
}

/// Why a run failed, if it did.
fn failure(t: &Target, run: &Run, input: &Input) -> Option<String> {
    let limit = bound(input.len()) + t.allowance;
    match &run.outcome {
        Err(panic) => Some(format!("panicked: {panic}")),
        Ok(Outcome::Violation(why)) => Some(format!("property broken: {why}")),
        Ok(_) if run.usage.largest > limit || run.usage.peak > limit => Some(format!(
            "allocated past the bound of {limit} bytes for a {}-byte input: largest single \
             allocation {}, peak {}",
            input.len(),
            run.usage.largest,
            run.usage.peak
        )),
        Ok(_) => None,
    }
}

#[derive(Default)]
struct Tally {
    inputs: u64,
    accepted: u64,
    refused: u64,
    failed: u64,
    largest: usize,
    peak: usize,
    /// The largest share of its bound an input used (largest allocation or peak).
    bound_use: f64,
    input_bytes: u64,
    seconds: f64,
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let all = targets::all();
    if o.list {
        for t in &all {
            println!("{}", t.name);
        }
        return ExitCode::SUCCESS;
    }
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if IN_RUN.with(std::cell::Cell::get) {
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
        } else {
            default_hook(info);
        }
    }));
    let seeds = Seeds::new();

    if let Some((name, seed)) = &o.replay {
        let Some(t) = all.iter().find(|t| t.name == name) else {
            eprintln!("no target '{name}' (see --list)");
            return ExitCode::from(2);
        };
        let input = (t.gen)(&mut Rng::new(*seed), &seeds);
        println!("{} seed {seed:#x}\n{}", t.name, describe(&input));
        alloc::set_current(t.name, *seed);
        let run = run_one(t, &seeds, &input);
        println!(
            "  largest allocation {} bytes, peak {} bytes (bound {})",
            run.usage.largest,
            run.usage.peak,
            bound(input.len()) + t.allowance
        );
        return match failure(t, &run, &input) {
            Some(why) => {
                println!("  FAILED: {why}");
                ExitCode::FAILURE
            }
            None => {
                println!("  passed");
                ExitCode::SUCCESS
            }
        };
    }

    let chosen: Vec<&Target> = all
        .iter()
        .filter(|t| o.targets.is_empty() || o.targets.iter().any(|n| n == t.name))
        .collect();
    if chosen.is_empty() {
        eprintln!("no target matches {:?} (see --list)", o.targets);
        return ExitCode::from(2);
    }
    let weights: u64 = chosen.iter().map(|t| t.weight).sum();
    println!(
        "fuzz: {} inputs, seed {:#x}, allocation bound {} B + {} B per input byte",
        o.inputs, o.seed, BOUND_BASE, BOUND_PER_BYTE
    );
    let started = Instant::now();
    let mut failures = 0usize;
    let mut tallies = Vec::new();
    let mut assigned = 0u64;
    for (i, t) in chosen.iter().enumerate() {
        let count = if i + 1 == chosen.len() {
            o.inputs - assigned
        } else {
            (o.inputs * t.weight / weights)
                .max(1)
                .min(o.inputs - assigned)
        };
        assigned += count;
        let mut tally = Tally::default();
        let t0 = Instant::now();
        for index in 0..count {
            let seed = input_seed(o.seed, t.name, index);
            let input = (t.gen)(&mut Rng::new(seed), &seeds);
            alloc::set_current(t.name, seed);
            let run = run_one(t, &seeds, &input);
            tally.inputs += 1;
            tally.input_bytes += input.len() as u64;
            tally.largest = tally.largest.max(run.usage.largest);
            tally.peak = tally.peak.max(run.usage.peak);
            let used = run.usage.peak.max(run.usage.largest) as f64
                / (bound(input.len()) + t.allowance) as f64;
            tally.bound_use = tally.bound_use.max(used);
            match &run.outcome {
                Ok(Outcome::Accepted) => tally.accepted += 1,
                Ok(Outcome::Refused) => tally.refused += 1,
                _ => {}
            }
            if let Some(why) = failure(t, &run, &input) {
                tally.failed += 1;
                failures += 1;
                println!(
                    "FAIL {} input #{index} seed {seed:#x}: {why}\n{}\n  replay: scripts/fuzz.sh --replay {}:{seed:#x}",
                    t.name,
                    describe(&input),
                    t.name
                );
                if failures >= o.max_failures {
                    break;
                }
            }
        }
        tally.seconds = t0.elapsed().as_secs_f64();
        tallies.push((t.name, tally));
        if failures >= o.max_failures {
            println!("stopping after {failures} failures");
            break;
        }
    }
    let total = started.elapsed().as_secs_f64();
    println!(
        "\n{:<20} {:>10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>9} {:>10}",
        "target",
        "inputs",
        "accepted",
        "refused",
        "failed",
        "max alloc",
        "max peak",
        "of bound",
        "inputs/s"
    );
    let mut sum = Tally::default();
    for (name, t) in &tallies {
        println!(
            "{:<20} {:>10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>8.1}% {:>10.0}",
            name,
            t.inputs,
            t.accepted,
            t.refused,
            t.failed,
            t.largest,
            t.peak,
            100.0 * t.bound_use,
            t.inputs as f64 / t.seconds.max(1e-9)
        );
        sum.inputs += t.inputs;
        sum.accepted += t.accepted;
        sum.refused += t.refused;
        sum.failed += t.failed;
        sum.largest = sum.largest.max(t.largest);
        sum.peak = sum.peak.max(t.peak);
        sum.bound_use = sum.bound_use.max(t.bound_use);
    }
    println!(
        "{:<20} {:>10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>8.1}% {:>10.0}",
        "all",
        sum.inputs,
        sum.accepted,
        sum.refused,
        sum.failed,
        sum.largest,
        sum.peak,
        100.0 * sum.bound_use,
        sum.inputs as f64 / total.max(1e-9)
    );
    println!(
        "{} inputs in {:.1} s; largest single allocation {} bytes, largest peak {} bytes \
         (bound {} B + {} B per input byte)",
        sum.inputs, total, sum.largest, sum.peak, BOUND_BASE, BOUND_PER_BYTE
    );
    if failures > 0 {
        println!("FAILED: {failures} inputs");
        ExitCode::FAILURE
    } else {
        println!("no failures");
        ExitCode::SUCCESS
    }
}
