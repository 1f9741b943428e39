# jq's builtins where jaq's standard library defines them differently or not at all.
# These come after jaq's definitions and shadow them; jqjail's natives (jq/funs.rs) shadow
# jaq's natives. Written for jqjail from jq 1.6's documented behaviour (jq 1.7's where 1.6
# had a bug that 1.7 fixed: `limit(0; f)`, `nth` past the end, `.[] |= empty`).

# Paths
def del(f): delpaths([path(f)]);
def to_entries: [keys_unsorted[] as $k | {key: $k, value: .[$k]}];
def from_entries:
  map({(.key // .Key // .name // .Name): (if has("value") then .value else .Value end)})
  | add + {} // {};
def with_entries(f): to_entries | map(f) | from_entries;
def leaf_paths: paths(scalars);
def recurse_down: recurse;
def walk(f): def w: if type == "object" then map_values(w) elif type == "array" then map(w) else . end | f; w;
def getpath($p):
  if $p | type != "array" then error("Path must be specified as an array")
  else reduce $p[] as $k (.; .[$k]) end;

# Streams of [path, leaf] events
def tostream:
  path(def r: (.[]? | r), .; r) as $p
  | getpath($p)
  | if (type == "array" or type == "object") and length > 0
    then [$p + [keys_unsorted[-1]]]
    else [$p, .] end;
def fromstream(f):
  {x: null, e: false} as $init
  | foreach f as $ev ($init;
      if .e then $init else . end
      | if $ev | length == 2
        then setpath(["e"]; $ev[0] | length == 0) | setpath(["x"] + $ev[0]; $ev[1])
        else setpath(["e"]; $ev[0] | length == 1) end;
      if .e then .x else empty end);
def truncate_stream(stream): . as $n | null | stream | select(.[0] | length > $n) | .[0] |= .[$n:];

# Math: C's functions where jaq's definitions differ (jq's `gamma` is C's, the log of Γ).
def significand: _jqjail_significand;
def logb: _jqjail_logb;
def gamma: _jqjail_gamma;

# Generators
def limit($n; f): if $n > 0 then _jaq_limit($n; f) elif $n == 0 then empty else f end;
def nth($n; f): if $n < 0 then error("nth doesn't support negative indices") else first(skip($n; f)) end;
def range($from; $upto; $by):
  if ($from | type) != "number" or ($upto | type) != "number" or ($by | type) != "number"
  then error("Range bounds must be numeric")
  elif $by == 0 then empty
  else _jaq_range($from; $upto; $by) end;
def IN(s): . as $x | any(s; . == $x);
def IN(src; s): any(src | IN(s); .);
def INDEX(stream; idx_expr):
  reduce stream as $row ({}; .[$row | idx_expr | if type != "string" then tojson else . end] |= $row);
def INDEX(idx_expr): INDEX(.[]; idx_expr);
def JOIN($idx; idx_expr): [.[] | [., $idx[idx_expr]]];
def JOIN($idx; stream; idx_expr): stream | [., $idx[idx_expr]];
def JOIN($idx; stream; idx_expr; join_expr): stream | [., $idx[idx_expr]] | join_expr;

# Arrays and strings
def join($x):
  reduce .[] as $i (null;
    (if . == null then "" else . + $x end)
    + ($i | if type == "boolean" or type == "number" then tojson elif . == null then "" else . end))
  // "";
def flatten($d):
  if $d < 0 then error("flatten depth must not be negative")
  else reduce .[] as $i ([]; if $i | type == "array" and $d > 0 then . + ($i | flatten($d - 1)) else . + [$i] end) end;
def flatten: flatten(1e9);
def index($i): indices($i) | .[0];
def rindex($i): indices($i) | .[-1:][0];
def reverse: if . == null then [] elif type == "string" then explode | _jaq_reverse | implode else _jaq_reverse end;
def transpose: if . == [] then [] else [range(map(length) | max) as $i | [.[][$i]]] end;
def scalars_or_empty: select(type != "array" and type != "object" or length == 0);
def todate: strftime("%Y-%m-%dT%H:%M:%SZ");
def todateiso8601: todate;
def fromdateiso8601: strptime("%Y-%m-%dT%H:%M:%SZ") | mktime;
def fromdate: fromdateiso8601;

# Dates: jq's messages for inputs that are not times
def _is_bdt: type == "array" and length >= 6 and all(.[:6][]; type == "number");
def mktime:
  if type != "array" then error("mktime requires array inputs")
  elif _is_bdt then _jaq_mktime
  else error("mktime requires parsed datetime inputs") end;
def gmtime: if type == "number" then _jaq_gmtime else error("gmtime() requires numeric inputs") end;
def strftime($f):
  if type == "number" or _is_bdt then _jaq_strftime($f)
  else error("strftime/1 requires parsed datetime inputs") end;

# Formats
def @uri: tostring | _jqjail_uri;

# What the sandbox leaves out, named
def input_line_number: error("input_line_number is not supported by jqjail: inputs are not read from a file");
def get_search_list: error("get_search_list is not supported by jqjail: modules are disabled");
def get_prog_origin: error("get_prog_origin is not supported by jqjail: modules are disabled");
def get_jq_origin: error("get_jq_origin is not supported by jqjail: modules are disabled");
def modulemeta: error("modulemeta is not supported by jqjail: modules are disabled");
