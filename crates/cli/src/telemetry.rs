//! Live OpenTelemetry export of the services this process starts (`[telemetry]`,
//! docs/observability.md): each service's live broadcast goes through a
//! `trellis_telemetry::live` pipeline when an OTLP endpoint is configured, and [`flush`]
//! sends what is queued before the process exits (bounded: a dead collector costs at most
//! [`FLUSH_DEADLINE`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use trellis_config::Config;
use trellis_core::service::Service;
use trellis_telemetry::live::{LiveOptions, Pipeline, spawn};
use trellis_telemetry::metrics::Pricing;
use trellis_telemetry::{Options, TelemetryConfig, config::SECTION, otlp};

/// How long one export may take (connect included).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the last flush may take at exit.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(3);

/// The pipelines started in this process.
static PIPELINES: Mutex<Vec<Pipeline>> = Mutex::new(Vec::new());

/// Starts exporting `service`'s spans when the workspace's `config` (or the OpenTelemetry
/// environment variables) name a collector; does nothing otherwise. Call inside the
/// runtime the service runs on.
pub fn start(config: &Config, service: &Service) -> anyhow::Result<()> {
    let workspace = config;
    let config: TelemetryConfig = config.section(SECTION)?;
    let Some(export) = config.export(|var| std::env::var(var).ok()) else {
        return Ok(());
    };
    let exporter = otlp::exporter(&export, EXPORT_TIMEOUT)?;
    let pipeline = spawn(
        service.live(),
        exporter,
        LiveOptions {
            mapping: Options {
                capture_content: export.capture_content,
            },
            queue: export.queue,
            export_timeout: EXPORT_TIMEOUT,
            service_name: export.service_name.clone(),
            ..LiveOptions::default()
        },
    );
    pipeline.metrics().set_prices(prices(workspace));
    PIPELINES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(pipeline);
    Ok(())
}

/// The prices of `config`'s model profiles by model name, for the cost metrics (a turn's
/// event names its model, not its profile). A model that two profiles price differently is
/// left unpriced rather than costed at a guess; a configuration the registry refuses prices
/// nothing (the run says what is wrong with it).
pub fn prices(config: &Config) -> Vec<(String, Pricing)> {
    let Ok(registry) = trellis_llm::ModelRegistry::from_config(config) else {
        return Vec::new();
    };
    let mut by_model: BTreeMap<String, Option<trellis_llm::Price>> = BTreeMap::new();
    for profile in registry.summaries() {
        let Some(price) = registry.price(&profile.name) else {
            continue;
        };
        by_model
            .entry(profile.model)
            .and_modify(|seen| {
                if *seen != Some(price) {
                    *seen = None;
                }
            })
            .or_insert(Some(price));
    }
    by_model
        .into_iter()
        .filter(|(model, _)| !model.is_empty())
        .filter_map(|(model, price)| {
            let price = price?;
            Some((model, Pricing::new(move |p, c| price.cost(p, c))))
        })
        .collect()
}

/// The metrics this process exports, when export is on (the first pipeline's).
pub fn metrics() -> Option<std::sync::Arc<trellis_telemetry::metrics::Metrics>> {
    PIPELINES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .first()
        .map(Pipeline::metrics)
}

/// Sends what the pipelines hold and stops them; says on stderr what could not be sent.
pub async fn flush() {
    let pipelines = std::mem::take(&mut *PIPELINES.lock().unwrap_or_else(PoisonError::into_inner));
    for pipeline in pipelines {
        let stats = pipeline.shutdown(FLUSH_DEADLINE).await;
        let (_, dropped, failed, lagged) = stats.snapshot();
        if dropped + failed + lagged > 0 {
            eprintln!(
                "telemetry: {} spans not exported ({dropped} dropped on a full queue, {failed} \
                 refused or timed out), {lagged} events missed",
                dropped + failed
            );
        }
    }
}
