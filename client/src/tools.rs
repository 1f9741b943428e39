//! Tool definitions for model APIs: `jq` and `json_path`, as JSON Schema, in the shapes the
//! major APIs accept. `jqjail tools` prints them. The hide-paging tools (`hide_next`,
//! `hide_jump`, `hide_search`) join them with the hide store.

use serde_json::{Value, json};

/// The output formats: a neutral list, OpenAI's function tools, Anthropic's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `[{name, description, parameters}]`.
    Neutral,
    /// `[{type: "function", function: {name, description, parameters}}]`.
    OpenAi,
    /// `[{name, description, input_schema}]`.
    Anthropic,
}

fn neutral() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "jq",
            "Run a jq filter over a JSON document in a sandbox and return the result as JSON text: one output is returned as that value, several as an array, none as null. Use it to narrow a large JSON tool result (for example `.items[:20]`, `map({id, title})`, `length`, `keys`). The output is capped at 100,000 bytes; narrow further when it is too large. The filter cannot read files, the environment or the network.",
            json!({
                "type": "object",
                "properties": {
                    "filter": {"type": "string", "description": "The jq filter, e.g. `.items[] | {id, name}`.", "maxLength": 65536},
                    "input": {"type": "string", "description": "The JSON document, as text."}
                },
                "required": ["filter", "input"],
                "additionalProperties": false
            }),
        ),
        (
            "json_path",
            "Extract part of a JSON document with a simple path: `a.b`, `items[0]`, `items[-1]`, `items['odd key']`, `items[*].name` (arrays only; nested wildcards give nested arrays). Elements missing a property are skipped by `[*]`. Errors name MISSING_PROPERTY, TYPE_MISMATCH, INDEX_OUT_OF_BOUNDS or INVALID_QUERY and where in the path it failed. No filters, pipes or functions: use the jq tool for those.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The path, e.g. `data.items[*].name`.", "maxLength": 200},
                    "input": {"type": "string", "description": "The JSON document, as text."}
                },
                "required": ["query", "input"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// The definitions in `format`.
pub fn definitions(format: Format) -> Value {
    Value::Array(
        neutral()
            .into_iter()
            .map(|(name, description, schema)| match format {
                Format::Neutral => {
                    json!({"name": name, "description": description, "parameters": schema})
                }
                Format::OpenAi => json!({
                    "type": "function",
                    "function": {"name": name, "description": description, "parameters": schema}
                }),
                Format::Anthropic => {
                    json!({"name": name, "description": description, "input_schema": schema})
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_carries_both_tools_with_a_closed_object_schema() {
        for (format, schema_key) in [
            (Format::Neutral, "/parameters"),
            (Format::OpenAi, "/function/parameters"),
            (Format::Anthropic, "/input_schema"),
        ] {
            let defs = definitions(format);
            let tools = defs.as_array().unwrap();
            assert_eq!(tools.len(), 2);
            for tool in tools {
                let schema = tool.pointer(schema_key).unwrap();
                assert_eq!(schema["type"], "object");
                assert_eq!(schema["additionalProperties"], false);
                for required in schema["required"].as_array().unwrap() {
                    assert!(
                        schema["properties"]
                            .get(required.as_str().unwrap())
                            .is_some()
                    );
                }
            }
        }
        assert_eq!(
            definitions(Format::OpenAi)[1]["function"]["name"],
            "json_path"
        );
    }
}
