//! [`Metrics`](crate::metrics::Metrics) as an OTLP `ExportMetricsServiceRequest`: counters as
//! monotonic cumulative sums since the pipeline started, gauges as gauges.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};

use opentelemetry_proto::tonic::resource::v1::Resource as ProtoResource;

use crate::metrics::{Family, Kind, Number};
use crate::otlp_json::Resource;
use crate::semconv;
use crate::span::Value;

/// `AGGREGATION_TEMPORALITY_CUMULATIVE`.
const CUMULATIVE: i32 = 2;

/// The request carrying `families` as of `now_ns`, counted since `start_ns`.
pub fn export_request(
    resource: &Resource,
    families: Vec<Family>,
    start_ns: u64,
    now_ns: u64,
) -> ExportMetricsServiceRequest {
    let metrics = families
        .into_iter()
        .map(|family| {
            let data_points = family
                .points
                .into_iter()
                .map(|p| NumberDataPoint {
                    attributes: p
                        .labels
                        .into_iter()
                        .map(|(key, value)| text(key, value))
                        .collect(),
                    start_time_unix_nano: start_ns,
                    time_unix_nano: now_ns,
                    value: Some(match p.value {
                        Number::Int(n) => {
                            number_data_point::Value::AsInt(i64::try_from(n).unwrap_or(i64::MAX))
                        }
                        Number::Float(x) => number_data_point::Value::AsDouble(x),
                    }),
                    ..Default::default()
                })
                .collect();
            let data = match family.kind {
                Kind::Counter => metric::Data::Sum(Sum {
                    data_points,
                    aggregation_temporality: CUMULATIVE,
                    is_monotonic: true,
                }),
                Kind::Gauge => metric::Data::Gauge(Gauge { data_points }),
            };
            Metric {
                name: family.name.to_owned(),
                description: family.help.to_owned(),
                unit: family.unit.to_owned(),
                data: Some(data),
                ..Default::default()
            }
        })
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(ProtoResource {
                attributes: resource
                    .attributes()
                    .into_iter()
                    .filter_map(|(key, value)| match value {
                        Value::Str(s) => Some(text(key, s)),
                        _ => None,
                    })
                    .collect(),
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "trellis".to_owned(),
                    version: resource.service_version.clone(),
                    ..Default::default()
                }),
                metrics,
                schema_url: semconv::SCHEMA_URL.to_owned(),
            }],
            schema_url: semconv::SCHEMA_URL.to_owned(),
        }],
    }
}

/// A text attribute.
fn text(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..Default::default()
    }
}
