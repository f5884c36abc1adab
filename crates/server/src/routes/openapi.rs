//! The OpenAPI 3.1 document, generated from the route table and the request types
//! (`GET /api/openapi.json`; `docs/openapi.json` is a copy checked by a test).

use serde_json::{Map, Value, json};
use trellis_protocol::EventFrame;
use trellis_protocol::schema::{ComponentSchemas, Direction};

use super::table;

/// Path parameters' meanings.
fn param_doc(name: &str) -> &'static str {
    match name {
        "id" => {
            "a run id or a unique prefix (a session id or a channel name under /sessions and /channels)"
        }
        "node" => "a node id of the run",
        "stream" => "`run:<id>`, `session:<id>` or `workspace`",
        _ => "",
    }
}

/// The document.
pub fn document() -> Value {
    let mut requests = ComponentSchemas::new(Direction::Request);
    let mut responses = ComponentSchemas::with_suffix(Direction::Response, "Response");
    let frame = responses.schema_for::<EventFrame<'static>>();
    // The ops a WebSocket client sends in `{"type": "op", "op": …}` frames.
    let _ = requests.schema_for::<trellis_protocol::Op>();
    let error = json!({
        "type": "object",
        "required": ["error", "kind"],
        "properties": {
            "error": { "type": "string", "description": "what went wrong and what to do" },
            "kind": { "type": "string", "enum": ["invalid", "not_found", "conflict", "upstream", "unavailable", "internal", "unauthorized", "forbidden", "too_large", "busy"] },
            "field": { "type": "string", "description": "the offending field of the body" }
        }
    });
    let mut paths = Map::new();
    for r in table() {
        let mut params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| {
                json!({ "name": name, "in": "path", "required": true,
                        "description": param_doc(name), "schema": { "type": "string" } })
            })
            .collect();
        params.extend(r.query.iter().map(|(name, doc)| {
            json!({ "name": name, "in": "query", "required": false,
                    "description": doc, "schema": { "type": "string" } })
        }));
        let mut op = json!({
            "summary": r.summary,
            "parameters": params,
            "responses": {
                "2XX": { "description": r.answer },
                "4XX": { "description": "refused: 400 bad input (naming the field), 401 no token, 403 foreign Host or Origin, 404 unknown id, 409 not valid in the current state, 413 too large, 415 not JSON",
                         "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
                "5XX": { "description": "502 a model endpoint failed, 503 shutting down, 500 a bug (details in the server log only)",
                         "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
            }
        });
        if r.answer.contains("[frame]") {
            op["responses"]["2XX"]["content"] =
                json!({ "application/json": { "schema": { "type": "array", "items": frame } } });
        }
        if let Some(body) = r.body {
            op["requestBody"] = json!({
                "required": false,
                "content": { "application/json": { "schema": body(&mut requests) } }
            });
        }
        if !matches!(r.path, "/api/health" | "/api/openapi.json" | "/login" | "/") {
            op["security"] = json!([{ "bearer": [] }, { "cookie": [] }]);
        }
        let entry = paths
            .entry(r.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[r.method.to_ascii_lowercase()] = op;
    }
    let mut schemas = requests.into_components();
    schemas.extend(responses.into_components());
    schemas.insert("Error".into(), error);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Trellis API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "`trellis serve`: every state-changing route is one op of the runtime service; events stream over the WebSocket at /api/events (docs/api.md, docs/events.md)."
        },
        "servers": [{ "url": "http://127.0.0.1:8420" }],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" },
                "cookie": { "type": "apiKey", "in": "cookie", "name": crate::security::COOKIE }
            }
        }
    })
}
