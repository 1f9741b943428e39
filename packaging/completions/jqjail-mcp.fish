complete -c jqjail-mcp -l socket -d 'The daemon\'s socket (default as for running a filter: $JQJAIL_SOCKET, the system daemon, or a private one, started if need be)' -r -F
complete -c jqjail-mcp -l hide-over -d 'Upstream results longer than this many bytes of text become hides' -r
complete -c jqjail-mcp -l upstream-timeout -d 'How long an upstream tool call may take, in seconds' -r
complete -c jqjail-mcp -l first -d 'What an output too large to show is first shown as: its head and tail (its beginning and its end, each half a page, and what lies between), or page 1' -r -f -a "head-and-tail\t''
page\t''"
complete -c jqjail-mcp -l upstream -d 'Start the MCP server CMD ARGS… (after `--`) and offer its tools beside jqjail\'s: a result over --hide-over bytes is kept as a hide, and every tool gains a `jq` argument'
complete -c jqjail-mcp -s h -l help -d 'Print help'
complete -c jqjail-mcp -s V -l version -d 'Print version'
