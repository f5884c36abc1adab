mod gateway;
mod http;
mod lsp;
mod tools;

/// No schema of `tool` uses a format JSON Schema does not define (schemars' `uint32`,
/// `double` …, which strict clients such as the MCP TypeScript SDK warn about).
fn assert_standard_formats(tool: &rmcp::model::Tool) {
    let text = serde_json::to_string(tool).unwrap();
    for f in ["uint", "int8", "int16", "int32", "int64", "double", "float"] {
        assert!(!text.contains(&format!("\"format\":\"{f}")), "{f}: {text}");
    }
}
