//! Tool definitions for model APIs: `jq`, `json_path`, `json_shape` and the hide-paging tools
//! (`hide_next`, `hide_jump`, `hide_search`), as JSON Schema, in the shapes the major APIs
//! accept. `jqjail tools` prints them, `jqjail mcp` offers them, and
//! [`crate::HideBuffer::call_tool`] answers the hide tools.
//!
//! Every schema is a closed object (`additionalProperties: false`) whose required properties
//! all exist, which Anthropic's `input_schema` and OpenAI's function tools accept. They are not
//! marked for OpenAI's strict mode, which requires every property, optional ones included, to
//! be listed in `required`.

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

/// jqjail's tools. Every list, format, dispatch and help text is made from this enum, with
/// exhaustive matches: a new tool does not compile until it has a name, a description, a
/// schema and a handler (in `jqjail mcp`, and in [`crate::HideBuffer`] for a hide tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// Run a jq filter.
    Jq,
    /// Extract with the path language.
    JsonPath,
    /// Summarise a document's structure.
    JsonShape,
    /// The next page of a hide.
    HideNext,
    /// One page of a hide by number.
    HideJump,
    /// Find text in a hide.
    HideSearch,
}

impl Tool {
    /// Every tool, in the order they are offered.
    pub const ALL: [Tool; 6] = [
        Tool::Jq,
        Tool::JsonPath,
        Tool::JsonShape,
        Tool::HideNext,
        Tool::HideJump,
        Tool::HideSearch,
    ];

    /// The tool's name, as a model calls it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Jq => "jq",
            Tool::JsonPath => "json_path",
            Tool::JsonShape => "json_shape",
            Tool::HideNext => "hide_next",
            Tool::HideJump => "hide_jump",
            Tool::HideSearch => "hide_search",
        }
    }

    /// The tool of this name, if there is one.
    pub fn named(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What the tool does, for the model.
    pub fn description(self) -> &'static str {
        match self {
            Tool::Jq => {
                "Run a jq filter over a JSON document in a sandbox and return the result as JSON text: one output is returned as that value, several as an array, none as null. Use it to narrow a large JSON tool result (for example `.items[:20]`, `map({id, title})`, `length`, `keys`). Give the document either as `input` or, for an output too large to read that was kept as a hide, as `hide_id`: the whole hide is filtered without passing through the conversation. The output is capped at 100,000 bytes; narrow further when it is too large. The filter cannot read files, the environment or the network."
            }
            Tool::JsonPath => {
                "Extract part of a JSON document with a simple path: `a.b`, `items[0]`, `items[-1]`, `items['odd key']`, `items[*].name` (arrays only; nested wildcards give nested arrays). Elements missing a property are skipped by `[*]`. Errors name MISSING_PROPERTY, TYPE_MISMATCH, INDEX_OUT_OF_BOUNDS or INVALID_QUERY and where in the path it failed. No filters, pipes or functions: use the jq tool for those."
            }
            Tool::JsonShape => {
                "Summarise the structure of a JSON document without reading it: its keys and their types, array lengths, which keys only some elements have (and how many), and a few short example values. At most 4 KiB whatever the size of the document. Use it first on a large result or hide, to write a correct jq filter or path."
            }
            Tool::HideNext => {
                "Read the next page of a tool output that was too large to show at once (a hide). Returns the page after the last one you read of that hide, or page 1. Pages of JSON end between values, and each page's header names the paths it holds (`$[3].labels[0] … $[7].id`) and the array it is in, with its length. Summarise what you need from each page before reading further."
            }
            Tool::HideJump => {
                "Read one page of a hide: by number (pages start at 1; the header of every page says how many there are), or, for JSON, the page holding the value at a path, written as page headers write them (`$[130].labels`) or as a jq path (`.[130].labels`). Give `page` or `path`."
            }
            Tool::HideSearch => {
                "Find text in a hide and read the page where it first occurs. Says plainly when the text does not occur anywhere in the hide (including across page boundaries)."
            }
        }
    }

    /// The JSON Schema of its structured answer, for a tool whose answer is always one JSON
    /// object (MCP's `outputSchema`; the answer's text is that object's JSON text).
    pub fn output_schema(self) -> Option<Value> {
        match self {
            Tool::JsonShape => Some(json!({
                "type": "object",
                "description": "The document's shape: its `type`, and by type its `keys` (each a shape, with how many elements have it), an array's `length` and `items`, and a few `examples`.",
                "properties": {
                    "type": {"description": "The JSON type, or the types where they differ.", "type": ["string", "array"]},
                    "keys": {"type": "object"},
                    "length": {"type": "integer"},
                    "items": {"type": "object"},
                    "examples": {"type": "array"}
                },
                "required": ["type"]
            })),
            Tool::Jq | Tool::JsonPath | Tool::HideNext | Tool::HideJump | Tool::HideSearch => None,
        }
    }

    /// The JSON Schema of its arguments.
    pub fn schema(self) -> Value {
        match self {
            Tool::Jq => json!({
                "type": "object",
                "properties": {
                    "filter": {"type": "string", "description": "The jq filter, e.g. `.items[] | {id, name}`.", "maxLength": 65536},
                    "input": {"description": "The JSON document: its text, or the JSON value itself (leave out when giving hide_id). A string is always read as JSON text, so a string value is given as its JSON text, quotes included."},
                    "hide_id": {"type": "string", "description": "The ID of a hide to filter instead of input, e.g. `github-1a2b3c4d`.", "maxLength": 97},
                    "args": {"type": "object", "description": "Values for the filter, bound as `$name` (and in `$ARGS.named`): pass values here rather than writing them into the filter text. Keys are jq variable names.", "additionalProperties": true}
                },
                "required": ["filter"],
                "additionalProperties": false
            }),
            Tool::JsonPath => json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The path, e.g. `data.items[*].name`.", "maxLength": 200},
                    "input": {"description": "The JSON document: its text, or the JSON value itself (leave out when giving hide_id). A string is always read as JSON text, so a string value is given as its JSON text, quotes included."},
                    "hide_id": {"type": "string", "description": "The ID of a hide to query instead of input.", "maxLength": 97}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            Tool::JsonShape => json!({
                "type": "object",
                "properties": {
                    "input": {"description": "The JSON document: its text, or the JSON value itself (leave out when giving hide_id). A string is always read as JSON text, so a string value is given as its JSON text, quotes included."},
                    "hide_id": {"type": "string", "description": "The ID of a hide to summarise instead of input.", "maxLength": 97}
                },
                "required": [],
                "additionalProperties": false
            }),
            Tool::HideNext => json!({
                "type": "object",
                "properties": {
                    "hide_id": {"type": "string", "description": "The hide to page; defaults to the most recent one.", "maxLength": 97}
                },
                "required": [],
                "additionalProperties": false
            }),
            Tool::HideJump => json!({
                "type": "object",
                "properties": {
                    "hide_id": {"type": "string", "description": "The hide to read; defaults to the most recent one.", "maxLength": 97},
                    "page": {"type": "integer", "minimum": 1, "description": "The page number (or give path)."},
                    "path": {"type": "string", "description": "For a JSON hide: the path of a value, e.g. `$[130].labels` or `.[130].labels`; the page holding it is read (or give page).", "maxLength": 4096}
                },
                "required": [],
                "additionalProperties": false
            }),
            Tool::HideSearch => json!({
                "type": "object",
                "properties": {
                    "hide_id": {"type": "string", "description": "The hide to search; defaults to the most recent one.", "maxLength": 97},
                    "query": {"type": "string", "description": "The text to find, matched literally.", "minLength": 1, "maxLength": 1024},
                    "ignore_case": {"type": "boolean", "description": "Match regardless of case (default false)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }
}

/// The tools as (name, description, JSON Schema of the arguments): the one list every format
/// and the MCP server are made from.
pub fn list() -> Vec<(&'static str, &'static str, Value)> {
    Tool::ALL
        .into_iter()
        .map(|t| (t.name(), t.description(), t.schema()))
        .collect()
}

/// The definitions in `format`.
pub fn definitions(format: Format) -> Value {
    Value::Array(
        list()
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
    fn every_format_carries_every_tool_with_a_closed_object_schema() {
        for (format, schema_key) in [
            (Format::Neutral, "/parameters"),
            (Format::OpenAi, "/function/parameters"),
            (Format::Anthropic, "/input_schema"),
        ] {
            let defs = definitions(format);
            let tools = defs.as_array().unwrap();
            assert_eq!(tools.len(), 6);
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
        let names: Vec<_> = definitions(Format::OpenAi)
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "jq",
                "json_path",
                "json_shape",
                "hide_next",
                "hide_jump",
                "hide_search"
            ]
        );
    }
}
