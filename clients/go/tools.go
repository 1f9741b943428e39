package jqjail

import (
	_ "embed"
	"encoding/json"
)

// tools.json is the list `jqjail tools` prints; the repository's tests check the copy.
//
//go:embed tools.json
var toolsJSON []byte

// ToolDefinition is a tool an agent runtime offers a model: its name, what it does, and the
// JSON Schema of its arguments.
type ToolDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ToolDefs are the definitions of jqjail's tools for a model (jq, json_path, json_shape,
// hide_next, hide_jump, hide_search), from the same list as `jqjail tools`.
func ToolDefs() []ToolDefinition {
	var defs []ToolDefinition
	if err := json.Unmarshal(toolsJSON, &defs); err != nil {
		panic("jqjail: the embedded tools.json does not decode: " + err.Error())
	}
	return defs
}
