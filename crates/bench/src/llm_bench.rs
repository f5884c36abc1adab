//! `trellis-llm-bench`: prompt-processing and generation speed of Trellis's embedded model
//! (trellis-llm's llama.cpp provider, through its streaming API) against llama.cpp's own
//! `llama-bench` on the same GGUF, the same thread count and the same build flags, in one
//! invocation. Writes a section of docs/benchmarks.md.
//!
//! ```sh
//! cargo run --release -p trellis-bench --bin trellis-llm-bench
//! cargo run --release -p trellis-bench --bin trellis-llm-bench -- --threads 1,2 --reps 5
//! ```
//!
//! `llama-bench` is built once, into `$CARGO_TARGET_DIR/llama-bench-<version>`, from the
//! llama.cpp sources vendored in the `llama-cpp-sys-2` crate (the exact llama.cpp trellis-llm
//! links) with the same options (and any `GGML_*` variables in the environment). That crate ships
//! llama.cpp without its tools, so the llama-bench driver (`tools/llama-bench/*.cpp`, which
//! only calls the public llama API) is taken from the llama.cpp vendored in the PyPI sdist of
//! `llama-cpp-python` 0.3.36 (pinned by SHA-256) and compiled against the crate's sources.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use trellis_llm::download::{SMOLLM2_135M, model_cache_dir};
use trellis_llm::embedded::{EmbeddedProvider, EmbeddedSettings, ModelSource};
use trellis_llm::{ChatRequest, Message, ModelProvider, StreamEvent};
use trellis_test_support::usage;

const LLAMA_CPP_SYS_VERSION: &str = "0.1.160";
const SDIST_URL: &str = "https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz";
const SDIST_SHA256: &str = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e";
const SDIST_BENCH_DIR: &str = "llama_cpp_python-0.3.36/vendor/llama.cpp/tools/llama-bench";
/// The section markers of one model's results: each GGUF keeps its own section.
fn markers(model: &str) -> (String, String) {
    (
        format!("<!-- trellis-llm-bench:begin {model} -->"),
        format!("<!-- trellis-llm-bench:end {model} -->"),
    )
}

/// Embedded model vs llama-bench.
#[derive(Debug, Parser)]
#[command(
    name = "trellis-llm-bench",
    version,
    about = "Prompt-processing and generation speed of the embedded model against llama.cpp's own llama-bench on the same GGUF."
)]
struct Args {
    /// The GGUF (default: the built-in SmolLM2-135M-Instruct, fetched if needed).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    threads: Vec<u32>,
    /// Approximate prompt length in tokens.
    #[arg(long, default_value_t = 128)]
    prompt: usize,
    /// Tokens to generate.
    #[arg(long, default_value_t = 64)]
    generate: u32,
    /// Repetitions (after one warm-up).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// A prebuilt llama-bench binary (default: build it from the vendored sources).
    #[arg(long)]
    llama_bench: Option<PathBuf>,
    /// Where to write the section (default docs/benchmarks.md; `-` prints it only).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn repo_root() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .nth(2)
        .map_or_else(|| crate_dir.to_owned(), Path::to_owned)
}

fn log(line: &str) {
    eprintln!("[trellis-llm-bench] {line}");
}

fn target_dir(repo: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo.join("target"), PathBuf::from)
}

fn llama_src() -> anyhow::Result<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
        PathBuf::from,
    );
    let registry = cargo_home.join("registry").join("src");
    for entry in
        std::fs::read_dir(&registry).with_context(|| format!("reading {}", registry.display()))?
    {
        let dir = entry?
            .path()
            .join(format!("llama-cpp-sys-2-{LLAMA_CPP_SYS_VERSION}"))
            .join("llama.cpp");
        if dir.join("tools").join("llama-bench").is_dir() {
            return Ok(dir);
        }
    }
    bail!(
        "llama-cpp-sys-2 {LLAMA_CPP_SYS_VERSION} sources not found under {}",
        registry.display()
    )
}

/// `GGML_*` options set in the environment (llama-cpp-sys-2 passes the same ones to its build).
fn ggml_flags() -> Vec<(String, String)> {
    let mut flags: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("GGML_"))
        .collect();
    flags.sort();
    flags
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// The llama-bench driver sources from the pinned sdist (downloaded once, checksum-checked).
fn bench_driver_sources(work: &Path) -> anyhow::Result<PathBuf> {
    let dir = work.join(SDIST_BENCH_DIR);
    if dir.join("llama-bench.cpp").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(work)?;
    let sdist = work.join("llama_cpp_python-0.3.36.tar.gz");
    if !sdist.is_file() {
        log("downloading the llama-bench driver (llama-cpp-python 0.3.36 sdist from PyPI)");
        run(Command::new("curl")
            .args(["-fsSL", "--retry", "3", "-o"])
            .arg(&sdist)
            .arg(SDIST_URL))?;
    }
    let sum = sh("sha256sum", &[&sdist.to_string_lossy()]);
    if !sum.starts_with(SDIST_SHA256) {
        let _ = std::fs::remove_file(&sdist);
        bail!("{SDIST_URL}: checksum mismatch ({sum})");
    }
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&sdist)
        .arg("-C")
        .arg(work)
        .arg(SDIST_BENCH_DIR))?;
    Ok(dir)
}

fn build_llama_bench(repo: &Path) -> anyhow::Result<PathBuf> {
    let root = target_dir(repo).join(format!("llama-bench-{LLAMA_CPP_SYS_VERSION}"));
    let build = root.join("build");
    let bin = build.join("bin").join("llama-bench");
    if bin.is_file() {
        return Ok(bin);
    }
    let src = llama_src()?;
    let driver = bench_driver_sources(&root.join("sdist"))?;
    log(&format!(
        "building llama-bench against {} (a few minutes)",
        src.display()
    ));
    // A private copy of the crate's llama.cpp with the driver added and the tools list cut
    // down to it (the crate ships no other tool sources).
    let tree = root.join("llama.cpp");
    let _ = std::fs::remove_dir_all(&tree);
    run(Command::new("cp").arg("-r").arg(&src).arg(&tree))?;
    run(Command::new("cp")
        .arg("-r")
        .arg(&driver)
        .arg(tree.join("tools")))?;
    std::fs::write(
        tree.join("tools").join("CMakeLists.txt"),
        "find_package(Threads REQUIRED)\nllama_add_compile_flags()\nadd_subdirectory(llama-bench)\n",
    )?;
    let mut configure = Command::new("cmake");
    configure.arg("-S").arg(&tree).arg("-B").arg(&build).args([
        "-DCMAKE_BUILD_TYPE=Release",
        "-DGGML_NATIVE=OFF",
        "-DGGML_OPENMP=OFF",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DBUILD_SHARED_LIBS=OFF",
    ]);
    for (k, v) in ggml_flags() {
        configure.arg(format!("-D{k}={v}"));
    }
    run(&mut configure)?;
    run(Command::new("cmake").arg("--build").arg(&build).args([
        "--target",
        "llama-bench",
        "-j",
        "2",
    ]))?;
    if !bin.is_file() {
        bail!("{} was not built", bin.display());
    }
    Ok(bin)
}

#[derive(Clone, Copy, Debug)]
struct Speed {
    pp: f64,
    tg: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The Trellis side: the embedded provider and a prompt of about the wanted length.
struct Ours {
    provider: EmbeddedProvider,
    words: String,
    n_prompt: u64,
    generate: u32,
}

impl Ours {
    async fn new(
        model: &Path,
        threads: u32,
        prompt_tokens: usize,
        generate: u32,
    ) -> anyhow::Result<Self> {
        let provider = EmbeddedProvider::new(
            "bench",
            ModelSource::Path(model.to_path_buf()),
            EmbeddedSettings {
                threads,
                max_tokens: generate,
                context: 2048,
                ignore_eos: true,
                ..EmbeddedSettings::default()
            },
        );
        provider.prepare().await?;
        let mut words =
            "the quick brown fox jumps over the lazy dog ".repeat(prompt_tokens / 9 + 1);
        // Trim the prompt to about `prompt_tokens` using the model's own count.
        while provider.count_tokens(&Self::request(&words, 0))?.tokens as usize > prompt_tokens {
            let cut = words.trim_end().rfind(' ').unwrap_or(0);
            words.truncate(cut);
        }
        let n_prompt = provider.count_tokens(&Self::request(&words, 0))?.tokens;
        Ok(Self {
            provider,
            words,
            n_prompt,
            generate,
        })
    }

    /// The prompt of round `round`: its own system line first, so that the provider's prefix
    /// reuse (which keeps the previous call's KV cache) cannot skip reading it.
    fn request(words: &str, round: usize) -> ChatRequest {
        ChatRequest::new(vec![
            Message::system(format!("Round {round:04}.")),
            Message::user(words),
        ])
    }

    /// One call: prompt tokens read (the reused prefix, a few template tokens, not counted) ÷
    /// time to the first delta; (generated − 1) ÷ time from the first to the last delta.
    async fn once(&self, round: usize) -> anyhow::Result<Speed> {
        let start = Instant::now();
        let mut stream = self
            .provider
            .stream(Self::request(&self.words, round), CancellationToken::new());
        let mut first = None;
        let mut last = start;
        let mut usage = None;
        while let Some(ev) = stream.next().await {
            match ev? {
                StreamEvent::TextDelta { .. } => {
                    let now = Instant::now();
                    first.get_or_insert(now);
                    last = now;
                }
                StreamEvent::Usage { usage: u } => usage = Some(u),
                _ => {}
            }
        }
        let first = first.context("no output")?;
        let usage = usage.context("no usage reported")?;
        if usage.completion_tokens != u64::from(self.generate) {
            bail!(
                "generated {} tokens, wanted {}",
                usage.completion_tokens,
                self.generate
            );
        }
        let read = usage.prompt_tokens - usage.cached_prompt_tokens;
        Ok(Speed {
            pp: read as f64 / (first - start).as_secs_f64(),
            tg: (usage.completion_tokens - 1) as f64 / (last - first).as_secs_f64(),
        })
    }
}

/// Runs `cmd` to the end, polling its `VmHWM`: its output and its peak resident memory in KiB
/// (`getrusage`'s children `ru_maxrss` would count this process's memory, inherited at fork).
fn run_measured(cmd: &mut Command) -> anyhow::Result<(std::process::Output, u64)> {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let status_path = format!("/proc/{}/status", child.id());
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut buf);
        }
        buf
    });
    let mut peak = 0;
    let status = loop {
        if let Some(hwm) = std::fs::read_to_string(&status_path).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        }) {
            peak = peak.max(hwm);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok((
        std::process::Output {
            status,
            stdout,
            stderr,
        },
        peak,
    ))
}

/// llama-bench's speeds: prompt processing of `prompt` tokens on an empty context, and
/// generation of `generate` tokens after `prompt` tokens (`-d`), as the Trellis side
/// generates after reading its prompt. Also its peak resident memory (KiB).
fn llama_bench_speed(
    bin: &Path,
    model: &Path,
    threads: u32,
    prompt: u64,
    generate: u32,
) -> anyhow::Result<(Speed, u64)> {
    let mut peak = 0;
    let mut rate = |args: [String; 6]| -> anyhow::Result<f64> {
        let (out, rss) = run_measured(Command::new(bin).arg("-m").arg(model).args(&args).args([
            "-t",
            &threads.to_string(),
            "-r",
            "1",
            "-o",
            "json",
        ]))
        .context("running llama-bench")?;
        peak = peak.max(rss);
        if !out.status.success() {
            bail!(
                "llama-bench failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let records: Vec<serde_json::Value> =
            serde_json::from_slice(&out.stdout).with_context(|| {
                format!(
                    "llama-bench output: {}",
                    String::from_utf8_lossy(&out.stdout)
                )
            })?;
        Ok(records
            .first()
            .and_then(|r| r["avg_ts"].as_f64())
            .unwrap_or(f64::NAN))
    };
    let s = |v: &str| v.to_owned();
    let pp = rate([
        s("-p"),
        prompt.to_string(),
        s("-n"),
        s("0"),
        s("-d"),
        s("0"),
    ])?;
    let tg = rate([
        s("-p"),
        s("0"),
        s("-n"),
        generate.to_string(),
        s("-d"),
        prompt.to_string(),
    ])?;
    Ok((Speed { pp, tg }, peak))
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let repo = repo_root();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let model = match &args.model {
        Some(p) => p.clone(),
        None => rt.block_on(SMOLLM2_135M.ensure(&model_cache_dir(), true))?,
    };
    let bin = match &args.llama_bench {
        Some(p) => p.clone(),
        None => build_llama_bench(&repo)?,
    };
    let load_before = sh("cat", &["/proc/loadavg"]);
    let started = sh("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]);
    let mut rows = Vec::new();
    let mut rss_theirs = 0;
    for &threads in &args.threads {
        // Interleave the two sides round by round so that a change in machine load hits both.
        log(&format!(
            "threads {threads}: {} rounds of trellis-llm + llama-bench",
            args.reps
        ));
        let ours = rt.block_on(Ours::new(&model, threads, args.prompt, args.generate))?;
        rt.block_on(ours.once(0))?; // warm-up
        let (mut op, mut ot, mut tp, mut tt) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 1..=args.reps {
            let o = rt.block_on(ours.once(round))?;
            let (t, rss) = llama_bench_speed(&bin, &model, threads, ours.n_prompt, args.generate)?;
            rss_theirs = rss_theirs.max(rss);
            op.push(o.pp);
            ot.push(o.tg);
            tp.push(t.pp);
            tt.push(t.tg);
        }
        let mine = Speed {
            pp: median(&mut op),
            tg: median(&mut ot),
        };
        let theirs = Speed {
            pp: median(&mut tp),
            tg: median(&mut tt),
        };
        rows.push((threads, ours.n_prompt, mine, theirs));
    }
    let load_after = sh("cat", &["/proc/loadavg"]);
    let mib = |kib: Option<u64>| {
        kib.map_or_else(|| "?".to_owned(), |k| format!("{:.0}", k as f64 / 1024.0))
    };
    let rss_ours = mib(usage::peak_rss_kib());
    let rss_theirs = mib(Some(rss_theirs));
    let model_name = model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (begin, end) = markers(&model_name);
    let mut flags: Vec<String> = ggml_flags()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if flags.is_empty() {
        flags.push(
            "ggml's default x86 kernels for GGML_NATIVE=OFF (SSE4.2, AVX, AVX2, FMA, F16C, BMI2)"
                .into(),
        );
    }
    let mut s = String::new();
    s.push_str(&format!(
        "{begin}\n## Embedded model vs llama.cpp (`trellis-llm-bench`): {model_name}\n\n"
    ));
    s.push_str("Generated by `trellis-llm-bench` (crates/bench/src/llm_bench.rs); re-run to update:\n\n```sh\n");
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // llama.cpp is -O3 in both profiles (see the root Cargo.toml); say which one ran.
    let release = if cfg!(debug_assertions) {
        ""
    } else {
        "--release "
    };
    s.push_str(&format!(
        "cargo run {release}-p trellis-bench --bin trellis-llm-bench -- {}\n```\n\n",
        argv.join(" ")
    ));
    s.push_str(&format!(
        "Model `{}`; {} rounds, each one Trellis call then one llama-bench run (`-r 1`, after its own warm-up), medians over the rounds; greedy sampling, end-of-generation ignored. \
         Both sides are the same llama.cpp sources (vendored in llama-cpp-sys-2 {LLAMA_CPP_SYS_VERSION}; llama-bench's driver from llama-cpp-python 0.3.36's llama.cpp) built Release (-O3), without OpenMP or GGML_NATIVE, with {}. \
         Trellis is measured through `EmbeddedProvider::stream` (tokenise, template, prefix reuse, sampling, channel), each round's prompt starting with its own system line so that the previous call's KV cache cannot be reused for it: \
         prompt speed = prompt tokens read (the reused template prefix of a few tokens not counted) ÷ time to the first streamed token, generation speed = (tokens − 1) ÷ time from the first to the last token, after the prompt. \
         llama-bench reports pp (prompt batch, empty context: `-p N -n 0`) and tg (single-token decode, no sampling, after N tokens of context: `-p 0 -n G -d N`) on random tokens. \
         Peak resident memory (`VmHWM`; this process holds the model and the context; llama-bench's polled from /proc while it runs): Trellis {rss_ours} MiB, llama-bench {rss_theirs} MiB. \
         Started {started}; /proc/loadavg before `{load_before}`, after `{load_after}`.\n\n",
        model_name,
        args.reps,
        flags.join(", "),
    ));
    s.push_str("| threads | prompt tokens | Trellis pp tok/s | llama-bench pp tok/s | ratio | Trellis tg tok/s | llama-bench tg tok/s | ratio | goal ≥ 0.9× |\n|---|---|---|---|---|---|---|---|---|\n");
    for (threads, n_prompt, ours, theirs) in &rows {
        let rp = ours.pp / theirs.pp;
        let rg = ours.tg / theirs.tg;
        let met = if rp >= 0.9 && rg >= 0.9 {
            "met"
        } else {
            "**missed**"
        };
        s.push_str(&format!(
            "| {threads} | {n_prompt} | {:.1} | {:.1} | {rp:.2}× | {:.1} | {:.1} | {rg:.2}× | {met} |\n",
            ours.pp, theirs.pp, ours.tg, theirs.tg
        ));
    }
    s.push_str(&format!("\n{end}\n"));
    print!("{s}");
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| repo.join("docs").join("benchmarks.md"));
    if out.as_os_str() != "-" {
        let existing = std::fs::read_to_string(&out).unwrap_or_default();
        let doc = replace_block(&existing, &s, &begin, &end);
        std::fs::write(&out, doc).with_context(|| format!("writing {}", out.display()))?;
        log(&format!("wrote {}", out.display()));
    }
    Ok(())
}

/// `doc` with the section between `begin` and `end` replaced by `block` (appended when absent).
pub fn replace_block(doc: &str, block: &str, begin: &str, end: &str) -> String {
    match (doc.find(begin), doc.find(end)) {
        (Some(b), Some(e)) if e > b => {
            format!("{}{}{}", &doc[..b], block.trim_end(), &doc[e + end.len()..])
        }
        _ => format!("{}\n{}", doc.trim_end(), block),
    }
}
