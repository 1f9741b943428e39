# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_jqjail_global_optspecs
    string join \n args jsonargs hide= on-oversize= socket= lang= timeout= max-output= arg= argjson= rawfile= slurpfile= c/compact-output r/raw-output j/join-output a/ascii-output S/sort-keys tab indent= n/null-input s/slurp e/exit-status f/from-file= R/raw-input seq C/color-output M/monochrome-output stream unbuffered L= h/help V/version
end

function __fish_jqjail_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_jqjail_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_jqjail_using_subcommand
    set -l cmd (__fish_jqjail_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c jqjail -n "__fish_jqjail_needs_command" -l hide -d 'Filter a hide of the store instead of a file (the daemon reads it off its disk)' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l on-oversize -d 'Output over the limit: `error` (OUTPUT_TOO_LARGE), or `hide` to keep it as a hide and print its first page' -r -f -a "error\t''
hide\t''"
complete -c jqjail -n "__fish_jqjail_needs_command" -l socket -d 'The daemon\'s socket (default: $JQJAIL_SOCKET, the system daemon, or a private one)' -r -F
complete -c jqjail -n "__fish_jqjail_needs_command" -l lang -d 'The filter language: `jq`, or `path` for the JMESPath-like subset (`items[*].name`)' -r -f -a "jq\t''
path\t''"
complete -c jqjail -n "__fish_jqjail_needs_command" -l timeout -d 'Wall-clock limit for this request: `500ms`, `2s`, or seconds' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l max-output -d 'Output limit for this request, in bytes' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l arg -d '`$NAME` is the string VALUE (repeatable). Values are data, never filter code' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l argjson -d '`$NAME` is the JSON value TEXT (repeatable)' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l rawfile -d '`$NAME` is FILE\'s text, as a string (read here, never by a worker)' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l slurpfile -d '`$NAME` is an array of the JSON values in FILE (read here, never by a worker)' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l indent -d 'Spaces per indentation level (0 to 7; 0 prints compactly)' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -s f -l from-file -d 'The filter is FILE\'s text (read here); every word is then an input FILE' -r -F
complete -c jqjail -n "__fish_jqjail_needs_command" -s L -d 'jq\'s module search path: refused, since modules are disabled in jqjail' -r
complete -c jqjail -n "__fish_jqjail_needs_command" -l args -d 'The words after it (and after the filter) are strings in `$ARGS.positional`, not files'
complete -c jqjail -n "__fish_jqjail_needs_command" -l jsonargs -d 'The words after it (and after the filter) are JSON texts in `$ARGS.positional`'
complete -c jqjail -n "__fish_jqjail_needs_command" -s c -l compact-output -d 'Compact output: each output on one line'
complete -c jqjail -n "__fish_jqjail_needs_command" -s r -l raw-output -d 'Strings printed raw, without quotes or escapes'
complete -c jqjail -n "__fish_jqjail_needs_command" -s j -l join-output -d 'As -r, with no newline after each output'
complete -c jqjail -n "__fish_jqjail_needs_command" -s a -l ascii-output -d 'Non-ASCII characters printed as \\uXXXX escapes'
complete -c jqjail -n "__fish_jqjail_needs_command" -s S -l sort-keys -d 'Object keys printed in sorted order'
complete -c jqjail -n "__fish_jqjail_needs_command" -l tab -d 'A tab per indentation level'
complete -c jqjail -n "__fish_jqjail_needs_command" -s n -l null-input -d 'The input is `null`; FILE and stdin are not read'
complete -c jqjail -n "__fish_jqjail_needs_command" -s s -l slurp -d 'The input\'s JSON values, read as one array'
complete -c jqjail -n "__fish_jqjail_needs_command" -s e -l exit-status -d 'Exit status from the last output: 1 if false or null, 4 if there was none'
complete -c jqjail -n "__fish_jqjail_needs_command" -s R -l raw-input -d 'Each line of the input is a string input; with `-s`, the whole input is one string'
complete -c jqjail -n "__fish_jqjail_needs_command" -l seq -d 'RS (0x1e) before each output; an RS in the input separates values (RFC 7464)'
complete -c jqjail -n "__fish_jqjail_needs_command" -s C -l color-output -d 'Colour the output as jq does: the default where stdout is a terminal'
complete -c jqjail -n "__fish_jqjail_needs_command" -s M -l monochrome-output -d 'Do not colour the output'
complete -c jqjail -n "__fish_jqjail_needs_command" -l stream -d 'Each input value as jq\'s stream of `[path, leaf]` events, each event an input'
complete -c jqjail -n "__fish_jqjail_needs_command" -l unbuffered -d 'Accepted, as jq accepts it: each answer is written as soon as it comes'
complete -c jqjail -n "__fish_jqjail_needs_command" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_needs_command" -s V -l version -d 'Print version'
complete -c jqjail -n "__fish_jqjail_needs_command" -a "hide" -d 'jqjail hide: keep oversized outputs in the daemon\'s hide store and read them page by page'
complete -c jqjail -n "__fish_jqjail_needs_command" -a "shape" -d '`jqjail shape`: the shape summary of a JSON document'
complete -c jqjail -n "__fish_jqjail_needs_command" -a "stats" -d '`jqjail stats`: the daemon\'s counters'
complete -c jqjail -n "__fish_jqjail_needs_command" -a "tools" -d '`jqjail tools`: the tool definitions for a model API (no daemon is needed)'
complete -c jqjail -n "__fish_jqjail_needs_command" -a "mcp" -d 'The MCP server over stdio (jqjail-mcp(1)); its options are jqjail-mcp\'s'
complete -c jqjail -n "__fish_jqjail_needs_command" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "put" -d 'Store FILE (or stdin) as a hide; prints its entry'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "get" -d 'Write a hide\'s bytes to stdout'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "cut" -d 'Print one page of a hide'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "jump" -d 'Print the JSON page holding the value at PATH'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "ends" -d 'Print a hide\'s head and tail: its beginning and its end, each half the page size, and what lies between them'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "search" -d 'Find every occurrence of QUERY; exit status 1 when there is none'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "list" -d 'List this user\'s hides, newest first'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "rm" -d 'Delete a hide'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "usage" -d 'Bytes and hides held, and the quota'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and not __fish_seen_subcommand_from put get cut jump ends search list rm usage help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from put" -l source -d 'Where it came from (its letters and digits start the ID)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from put" -l kind -d 'What kind of content it is' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from put" -l meta -d 'A `key=value` pair to keep with it (repeatable)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from put" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from put" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from get" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from cut" -l page-size -d 'Bytes per page (64 to 1048576; default 16384)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from cut" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from cut" -l hint -d 'Add the reflection hint for a model'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from cut" -l json -d 'JSON pages: pages end between values and name the paths they hold (a hide that is not one JSON value is cut in bytes, and the answer says why)'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from cut" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from jump" -l page-size -d 'Bytes per page (64 to 1048576; default 16384)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from jump" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from jump" -l hint -d 'Add the reflection hint for a model'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from jump" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from ends" -l page-size -d 'Bytes of both ends together (128 to 1048576; default 16384)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from ends" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from ends" -l hint -d 'Add the reflection hint for a model'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from ends" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from search" -l page-size -d 'The page size the reported pages refer to (default 16384)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from search" -l max-matches -d 'Report at most this many matches (default 100, at most 10000)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from search" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from search" -s i -l ignore-case -d 'Match regardless of case'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from search" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from list" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from rm" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from usage" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from usage" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "put" -d 'Store FILE (or stdin) as a hide; prints its entry'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "get" -d 'Write a hide\'s bytes to stdout'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "cut" -d 'Print one page of a hide'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "jump" -d 'Print the JSON page holding the value at PATH'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "ends" -d 'Print a hide\'s head and tail: its beginning and its end, each half the page size, and what lies between them'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "search" -d 'Find every occurrence of QUERY; exit status 1 when there is none'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "list" -d 'List this user\'s hides, newest first'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "rm" -d 'Delete a hide'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "usage" -d 'Bytes and hides held, and the quota'
complete -c jqjail -n "__fish_jqjail_using_subcommand hide; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jqjail -n "__fish_jqjail_using_subcommand shape" -l hide -d 'Summarize a hide of the store instead (the daemon reads it off its disk)' -r
complete -c jqjail -n "__fish_jqjail_using_subcommand shape" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand shape" -s c -l compact-output -d 'Compact output'
complete -c jqjail -n "__fish_jqjail_using_subcommand shape" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand stats" -l socket -d 'The daemon\'s socket (default as for running a filter)' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand stats" -l format -d '`json`, or `prometheus` (the text exposition format, for node_exporter\'s textfile collector)' -r -f -a "json\t''
prometheus\t''"
complete -c jqjail -n "__fish_jqjail_using_subcommand stats" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand tools" -l socket -d 'Accepted as every subcommand accepts it; no daemon is asked' -r -F
complete -c jqjail -n "__fish_jqjail_using_subcommand tools" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand mcp" -s h -l help -d 'Print help'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and not __fish_seen_subcommand_from hide shape stats tools mcp help" -f -a "hide" -d 'jqjail hide: keep oversized outputs in the daemon\'s hide store and read them page by page'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and not __fish_seen_subcommand_from hide shape stats tools mcp help" -f -a "shape" -d '`jqjail shape`: the shape summary of a JSON document'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and not __fish_seen_subcommand_from hide shape stats tools mcp help" -f -a "stats" -d '`jqjail stats`: the daemon\'s counters'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and not __fish_seen_subcommand_from hide shape stats tools mcp help" -f -a "tools" -d '`jqjail tools`: the tool definitions for a model API (no daemon is needed)'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and not __fish_seen_subcommand_from hide shape stats tools mcp help" -f -a "mcp" -d 'The MCP server over stdio (jqjail-mcp(1)); its options are jqjail-mcp\'s'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and not __fish_seen_subcommand_from hide shape stats tools mcp help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "put" -d 'Store FILE (or stdin) as a hide; prints its entry'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "get" -d 'Write a hide\'s bytes to stdout'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "cut" -d 'Print one page of a hide'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "jump" -d 'Print the JSON page holding the value at PATH'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "ends" -d 'Print a hide\'s head and tail: its beginning and its end, each half the page size, and what lies between them'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "search" -d 'Find every occurrence of QUERY; exit status 1 when there is none'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "list" -d 'List this user\'s hides, newest first'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "rm" -d 'Delete a hide'
complete -c jqjail -n "__fish_jqjail_using_subcommand help; and __fish_seen_subcommand_from hide" -f -a "usage" -d 'Bytes and hides held, and the quota'
